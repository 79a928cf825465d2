// An exec session lasts as long as the sign-in that opened it: signing out, a
// refresh token used twice, a revocation another replica wrote, or the access
// token's expiry (unless the client renewed it on the connection) ends the
// shell, and so does a shell nobody uses. A real control plane on a real
// socket, tenants signed in with ed25519 keys, and the agent's real dial-back.
import { AGENT_EXEC_PATH, EXEC_CHANNEL, EXEC_CLOSE_CODES, EXEC_SUBPROTOCOL } from "@cm/protocol";
import { sqliteDatabase as db } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { hashSecret } from "../../src/services/ids";
import type { TestClock } from "../support/harness";
import { type AgentHarness, startAgentHarness } from "./support/agent-harness";

type Tenant = Awaited<ReturnType<AgentHarness["signIn"]>>;
const DAY_MS = 24 * 3600_000;
const stdin = (text: string) => Buffer.concat([Buffer.from([EXEC_CHANNEL.stdin]), Buffer.from(text)]);

/** A tenant's shell whose agent side is connected: what the tenant is told, and what reaches the agent. */
async function openShell(h: AgentHarness, node: Awaited<ReturnType<AgentHarness["connectedNode"]>>, depId: string, token: string) {
  const base = h.url.replace(/^http/, "ws");
  const ws = new WebSocket(`${base}/deployments/${depId}/exec`, [EXEC_SUBPROTOCOL], { headers: { authorization: `Bearer ${token}` } });
  const texts: Array<Record<string, unknown>> = [];
  const closed = new Promise<number>((r) => ws.once("close", (code) => r(code)));
  ws.on("message", (m, isBinary) => {
    if (!isBinary) texts.push(JSON.parse(m.toString()));
  });
  await new Promise((r) => ws.once("open", r));
  ws.send(JSON.stringify({ type: "start", command: ["sh"], tty: true }));
  const ask = await node.agent.next("open_exec", (f) => f.deploymentId === depId);
  const agent = new WebSocket(`${base}${AGENT_EXEC_PATH}?id=${ask.execId}`, { headers: { authorization: `Bearer ${node.agentToken}` } });
  const atAgent: Buffer[] = [];
  agent.on("message", (m) => atAgent.push(m as Buffer));
  const agentClosed = new Promise<void>((r) => agent.once("close", () => r()));
  await new Promise((r) => agent.once("open", r));
  /** Proves the shell still runs: typed input reaches the agent. */
  const echo = async (text: string) => {
    ws.send(stdin(text));
    await expect.poll(() => atAgent.some((m) => m.equals(stdin(text)))).toBe(true);
  };
  return { ws, texts, closed, agent, atAgent, agentClosed, echo };
}

describe("exec sessions end with the sign-in that opened them", () => {
  let h: AgentHarness;
  let op: Tenant;
  let node: Awaited<ReturnType<AgentHarness["connectedNode"]>>;
  beforeAll(async () => {
    // Another replica's revocation is noticed from the database within REVOCATION_CHECK_MS.
    h = await startAgentHarness(db, { REVOCATION_CHECK_MS: 50 });
    op = await h.signIn();
    node = await h.connectedNode(op.token, { maxDeployments: 20 });
  });
  afterAll(() => h.close());

  async function tenantWithShell() {
    const tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 100_000);
    const dep = await h.deploy(tenant.token, node.id, node.agent);
    await h.run(node.agent, dep.spec, tenant.token);
    return { tenant, dep, shell: await openShell(h, node, dep.id, tenant.token) };
  }

  it("ends the shell at sign-out, with UNAUTHORIZED and close code 4401, and hangs up on the node", async () => {
    const { tenant, shell } = await tenantWithShell();
    await shell.echo("ls\n");
    expect((await h.call("POST", "/auth/logout", { body: { refreshToken: tenant.refreshToken } })).status).toBe(200);
    expect(await shell.closed).toBe(EXEC_CLOSE_CODES.UNAUTHORIZED);
    expect(shell.texts).toEqual([{ type: "error", code: "UNAUTHORIZED", message: expect.stringContaining("sign in again") }]);
    await shell.agentClosed;
  });

  it("leaves the shells of another sign-in of the same wallet running", async () => {
    const { tenant, dep, shell } = await tenantWithShell();
    const other = await h.signIn(tenant.wallet);
    const otherShell = await openShell(h, node, dep.id, other.token);
    await h.call("POST", "/auth/logout", { body: { refreshToken: tenant.refreshToken } });
    expect(await shell.closed).toBe(EXEC_CLOSE_CODES.UNAUTHORIZED);
    await otherShell.echo("still here\n");
    otherShell.ws.close();
  });

  it("ends the shell when its refresh token is used twice (the family is revoked as stolen)", async () => {
    const { tenant, shell } = await tenantWithShell();
    expect((await h.call("POST", "/auth/refresh", { body: { refreshToken: tenant.refreshToken } })).status).toBe(200);
    expect((await h.call("POST", "/auth/refresh", { body: { refreshToken: tenant.refreshToken } })).status).toBe(401);
    expect(await shell.closed).toBe(EXEC_CLOSE_CODES.UNAUTHORIZED);
    expect(shell.texts).toMatchObject([{ type: "error", code: "UNAUTHORIZED" }]);
  });

  it("ends the shell when the database says its token was revoked, as another replica's sign-out writes it", async () => {
    const { tenant, shell } = await tenantWithShell();
    // Straight into the database: no notice reaches this process.
    expect(await h.deps.repos.auth.revokeFamily(hashSecret(tenant.refreshToken), Date.now())).toBeDefined();
    expect(await shell.closed).toBe(EXEC_CLOSE_CODES.UNAUTHORIZED);
    expect(shell.texts).toMatchObject([{ type: "error", code: "UNAUTHORIZED" }]);
  });

  it("ends the shell when a renew carries another account's token", async () => {
    const { shell } = await tenantWithShell();
    const stranger = await h.signIn();
    shell.ws.send(JSON.stringify({ type: "renew", accessToken: stranger.token }));
    expect(await shell.closed).toBe(EXEC_CLOSE_CODES.UNAUTHORIZED);
    expect(shell.texts).toMatchObject([{ type: "error", code: "UNAUTHORIZED" }]);
  });

  // Last: it moves the clock past every token signed in before.
  it("ends the shell when its access token expires, unless the client sent a fresh one (renew), which never reaches the node", async () => {
    const clock = h.deps.clock as TestClock;
    const kept = await tenantWithShell();
    const left = await tenantWithShell();
    // Both access tokens expire a year after sign-in; the kept shell's client refreshes (within its refresh token's 30 days) and renews on the connection.
    clock.advance(20 * DAY_MS);
    const fresh = await h.call("POST", "/auth/refresh", { body: { refreshToken: kept.tenant.refreshToken } });
    kept.shell.ws.send(JSON.stringify({ type: "renew", accessToken: fresh.json.accessToken }));
    await kept.shell.echo("after renew\n");
    clock.advance(346 * DAY_MS);

    expect(await left.shell.closed).toBe(EXEC_CLOSE_CODES.UNAUTHORIZED);
    expect(left.shell.texts).toEqual([{ type: "error", code: "TOKEN_EXPIRED", message: expect.stringContaining("refresh") }]);
    // Judged in the same check as the other: still running.
    await kept.shell.echo("still here\n");
    expect(kept.shell.atAgent.some((m) => m.toString().includes(fresh.json.accessToken))).toBe(false);
    expect(kept.shell.texts).toEqual([]);
    kept.shell.ws.close();
  });
});

describe("an idle exec session", () => {
  it("ends after EXEC_IDLE_TIMEOUT_MS with no input and no output, renews aside (IDLE_TIMEOUT, close code 4408)", async () => {
    const h = await startAgentHarness(db, { EXEC_IDLE_TIMEOUT_MS: 1_000 });
    try {
      const op = await h.signIn();
      const tenant = await h.signIn();
      await h.grantCredits(tenant.user.id, 100_000);
      const node = await h.connectedNode(op.token);
      const dep = await h.deploy(tenant.token, node.id, node.agent);
      await h.run(node.agent, dep.spec, tenant.token);
      const shell = await openShell(h, node, dep.id, tenant.token);
      // A client that renews its token as it refreshes is not using the shell.
      const renewing = setInterval(() => shell.ws.send(JSON.stringify({ type: "renew", accessToken: tenant.token })), 200);
      expect(await shell.closed).toBe(EXEC_CLOSE_CODES.IDLE);
      clearInterval(renewing);
      expect(shell.texts).toEqual([{ type: "error", code: "IDLE_TIMEOUT", message: "no input and no output for 1 s" }]);
      await shell.agentClosed;
    } finally {
      await h.close();
    }
  });
});
