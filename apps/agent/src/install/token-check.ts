// Asks the control plane which node the token belongs to (GET AGENT_WHOAMI_PATH).
// A plain lookup on purpose: saying hello on the agent socket would take the
// node's session from its running agent (closed 4409, and it stops) and mark a
// node with no agent online, so that tenants could deploy to it.
import { AGENT_WHOAMI_PATH, AgentWhoamiResponse, ErrorBody } from "@cm/protocol";

export type TokenCheck = { ok: true; nodeId: string; name: string } | { ok: false; reason: string; rejected: boolean };

export async function checkToken(fetchFn: typeof fetch, httpUrl: string, token: string, timeoutMs: number): Promise<TokenCheck> {
  const url = `${httpUrl}${AGENT_WHOAMI_PATH}`;
  let response: Response;
  let body: unknown;
  try {
    response = await fetchFn(url, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(timeoutMs) });
    body = await response.json().catch(() => undefined);
  } catch (error) {
    const cause = (error as { cause?: { message?: string } }).cause?.message;
    return { ok: false, reason: `GET ${url} failed: ${cause ?? (error as Error).message}`, rejected: false };
  }
  if (response.ok) {
    const node = AgentWhoamiResponse.safeParse(body);
    if (node.success) return { ok: true, nodeId: node.data.nodeId, name: node.data.name };
    return { ok: false, reason: `GET ${url} answered ${response.status} without a node: is CONTROL_PLANE_URL the control plane?`, rejected: false };
  }
  const error = ErrorBody.safeParse(body);
  const said = error.success ? `: ${error.data.error.message}` : "";
  if (response.status === 401) return { ok: false, reason: `the control plane rejected this agent's token${said}`, rejected: true };
  if (response.status === 404 && !error.success)
    return { ok: false, reason: `GET ${url} answered 404: CONTROL_PLANE_URL points elsewhere, or the control plane predates this check`, rejected: false };
  return { ok: false, reason: `GET ${url} answered ${response.status}${said}`, rejected: false };
}
