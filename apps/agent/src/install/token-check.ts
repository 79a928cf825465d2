// Opens the agent's WebSocket once, says hello and waits for welcome: the only
// way to know the control plane accepts this token. Closes with 1000 right after.
import { CLOSE_CODES, PROTOCOL_VERSIONS, parseFrame, RETRYABLE_CLOSE, ServerFrame } from "@cm/protocol";
import { explainFatalClose } from "../connection/close-codes";
import type { SocketFactory } from "../connection/socket";
import { AGENT_VERSION } from "../version";

export type TokenCheck = { ok: true; nodeId: string } | { ok: false; reason: string; rejected: boolean };

export function checkToken(socketFactory: SocketFactory, wsUrl: string, token: string, timeoutMs: number): Promise<TokenCheck> {
  return new Promise((resolve) => {
    let settled = false;
    let serverError = "";
    // Declared before finish() can run: a socket factory that throws settles at once.
    let timer: NodeJS.Timeout | undefined;
    const finish = (result: TokenCheck) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    let socket: ReturnType<SocketFactory>;
    try {
      socket = socketFactory(wsUrl);
    } catch (error) {
      return finish({ ok: false, reason: (error as Error).message, rejected: false });
    }
    timer = setTimeout(() => {
      socket.terminate();
      finish({ ok: false, reason: `no welcome within ${timeoutMs / 1000} s`, rejected: false });
    }, timeoutMs);
    socket.on("open", () => socket.send(JSON.stringify({ type: "hello", token, agentVersion: AGENT_VERSION, protocolVersions: [...PROTOCOL_VERSIONS] })));
    socket.on("message", (data) => {
      const parsed = parseFrame(ServerFrame, String(data));
      if (!parsed.ok) return;
      if (parsed.frame.type === "error") serverError = `${parsed.frame.code}: ${parsed.frame.message}`;
      if (parsed.frame.type === "welcome") {
        finish({ ok: true, nodeId: parsed.frame.nodeId });
        socket.close(CLOSE_CODES.NORMAL, "doctor done");
      }
    });
    socket.on("error", (error) => (serverError ||= error.message));
    socket.on("close", (code, reason) => {
      const fatal = !RETRYABLE_CLOSE(code);
      const why = fatal
        ? explainFatalClose(code, reason.toString())
        : `the connection closed (code ${code}) before welcome${serverError ? `: ${serverError}` : ""}`;
      finish({ ok: false, reason: why, rejected: fatal });
    });
  });
}
