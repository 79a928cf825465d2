import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { Repos } from "@cm/db";
import {
  EXEC_CHANNEL,
  EXEC_CLOSE_CODES,
  EXEC_MAX_MESSAGE_BYTES,
  EXEC_START_TIMEOUT_MS,
  EXEC_SUBPROTOCOL,
  ExecClientControl,
  type ExecErrorCode,
  ExecRenew,
  ExecServerControl,
  ExecStart,
  parseFrame,
  type ServerFrame,
  whenSendBufferBelow,
} from "@cm/protocol";
import { type RawData, WebSocket, WebSocketServer } from "ws";
import type { AccessGrant } from "../services/auth-service";
import type { EventBus } from "../services/events";
import type { GrantWatch } from "../services/grant-watch";
import { hashSecret } from "../services/ids";
import type { Logger } from "../services/logger";

export type ExecBrokerOptions = {
  repos: Repos;
  events: EventBus;
  /** Sends a frame on the node's control connection; false when it has none. */
  sendTo(nodeId: string, frame: ServerFrame): boolean;
  /** How long the agent has to connect back. */
  openTimeoutMs: number;
  /** A session with no input and no output for this long is ended. */
  idleTimeoutMs: number;
  /** Ends a session when the sign-in that opened it is over. */
  grants: GrantWatch;
  /** What a `renew`'s access token grants (the auth service's check), or why it grants nothing. */
  authenticate(accessToken: string): Promise<{ grant: AccessGrant }>;
  log: Logger;
};

/** Who the session is for, as the route checked it, and the grant of the token that asked. */
export type ExecTarget = { deploymentId: string; nodeId: string; log: Logger; requestId: string; grant: AccessGrant };

/** What one side may queue for the other before its sender is paused. */
const RELAY_BUFFER_BYTES = 1024 * 1024;
/** What is kept of a client's input before the agent's connection is there; past it the client is paused. */
const EARLY_INPUT_BYTES = 1024 * 1024;
/** Pings keep proxies from closing a shell nobody types in. */
const PING_INTERVAL_MS = 30_000;

type Pending = { nodeId: string; resolve(ws: WebSocket): void; timer: NodeJS.Timeout };
type Session = { deploymentId: string; end(code: ExecErrorCode, message: string, closeCode?: number): void };

/**
 * Shells and commands in tenants' containers (`cm exec`), relayed through the
 * node's agent the way tunnels are: the control plane asks over the agent's
 * control connection, the agent connects back with its token for this one
 * session, and the messages of both connections are passed on, the client's
 * checked first. The node needs no inbound port.
 */
export class ExecBroker {
  private readonly pending = new Map<string, Pending>();
  private readonly sessions = new Set<Session>();
  private readonly clients = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: EXEC_MAX_MESSAGE_BYTES,
    // Only ever ours: a `bearer.<token>` protocol is never echoed back.
    handleProtocols: (protocols) => (protocols.has(EXEC_SUBPROTOCOL) ? EXEC_SUBPROTOCOL : false),
  });
  private readonly agents = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: EXEC_MAX_MESSAGE_BYTES });

  /** Client connections per deployment, from the upgrade until they close: what the route's cap counts. */
  private readonly clientsOf = new Map<string, number>();

  /** The 101 carries the request id, as every answer of the API does. */
  private readonly requestIds = new WeakMap<IncomingMessage, string>();

  constructor(private readonly o: ExecBrokerOptions) {
    this.clients.on("headers", (headers, req) => {
      const id = this.requestIds.get(req);
      if (id) headers.push(`X-Request-Id: ${id}`);
    });
    o.events.on("deployment-changed", (d) => {
      if (d.status === "running") return;
      for (const s of this.sessions) if (s.deploymentId === d.id) s.end("SESSION_ENDED", `deployment ${d.id} is ${d.status}`);
    });
  }

  /** Takes a client's connection once the route has checked who asks and that the deployment runs. */
  acceptClient(req: IncomingMessage, socket: Duplex, head: Buffer, target: ExecTarget) {
    this.requestIds.set(req, target.requestId);
    // Counted from now, not once the handshake is done, so that a burst of opens
    // cannot all pass the cap; the socket's close is the one end every path has.
    const id = target.deploymentId;
    this.clientsOf.set(id, this.sessionsOf(id) + 1);
    socket.once("close", () => {
      const left = this.sessionsOf(id) - 1;
      if (left > 0) this.clientsOf.set(id, left);
      else this.clientsOf.delete(id);
    });
    this.clients.handleUpgrade(req, socket, head, (ws) => this.run(ws, target));
  }

  /** The deployment's client connections open or opening now. */
  sessionsOf(deploymentId: string): number {
    return this.clientsOf.get(deploymentId) ?? 0;
  }

  /** `GET /agent/exec?id=...` from an agent, with its token: the node's half of a session. */
  handleAgentUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    void this.acceptAgent(req, socket, head).catch(() => socket.destroy());
  };

  private async acceptAgent(req: IncomingMessage, socket: Duplex, head: Buffer) {
    const id = new URL(req.url ?? "/", "http://x").searchParams.get("id") ?? "";
    const token = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? "")?.[1];
    const node = token ? await this.o.repos.nodes.byAgentTokenHash(hashSecret(token)) : undefined;
    // Read after the lookup: a session that timed out or was closed meanwhile is not
    // waiting any more, and a connection taken for it would run a command nobody reads.
    const p = this.pending.get(id);
    // Only the node that was asked may answer: no other agent can take over a tenant's shell.
    if (!p || !node || node.id !== p.nodeId) {
      socket.end("HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    this.settle(id);
    this.agents.handleUpgrade(req, socket, head, (ws) => p.resolve(ws));
  }

  private run(client: WebSocket, target: ExecTarget) {
    const log = target.log.child({ deploymentId: target.deploymentId });
    let agent: WebSocket | undefined;
    let execId: string | undefined;
    let ended = false;
    const early: Array<{ data: Buffer; isBinary: boolean }> = [];
    let earlyBytes = 0;
    const ping = setInterval(() => client.ping(), PING_INTERVAL_MS);
    // Pings are not activity: a shell nobody types in and that prints nothing is idle.
    let activeAtMs = Date.now();
    const idleTimeoutMs = this.o.idleTimeoutMs;
    const checkIdle = () => {
      const idleMs = Date.now() - activeAtMs;
      if (idleMs < idleTimeoutMs) {
        idle = setTimeout(checkIdle, idleTimeoutMs - idleMs);
        return;
      }
      session.end("IDLE_TIMEOUT", `no input and no output for ${idleTimeoutMs / 1000} s`, EXEC_CLOSE_CODES.IDLE);
    };
    let idle = setTimeout(checkIdle, idleTimeoutMs);

    const session: Session = {
      deploymentId: target.deploymentId,
      end: (code, message, closeCode: number = EXEC_CLOSE_CODES.FAILED) => {
        if (ended) return;
        ended = true;
        if (client.readyState === WebSocket.OPEN) {
          client.send(JSON.stringify({ type: "error", code, message }));
          client.close(closeCode);
        }
        agent?.close(EXEC_CLOSE_CODES.NORMAL);
        cleanup();
      },
    };
    const cleanup = () => {
      clearTimeout(startTimer);
      clearTimeout(idle);
      grant.release();
      clearInterval(ping);
      if (execId) this.settle(execId);
      this.sessions.delete(session);
    };
    this.sessions.add(session);
    const grant = this.o.grants.hold(target.grant, (why) => session.end(why.code, why.message, EXEC_CLOSE_CODES.UNAUTHORIZED));
    const bad = (message: string) => session.end("BAD_MESSAGE", message, EXEC_CLOSE_CODES.BAD_MESSAGE);
    // A fresh token of the same account moves the session's end to that token's expiry; it never reaches the agent.
    const renew = (accessToken: string) =>
      this.o.authenticate(accessToken).then(
        (fresh) => {
          if (fresh.grant.userId !== target.grant.userId)
            return session.end("UNAUTHORIZED", "renew: the access token is another account's", EXEC_CLOSE_CODES.UNAUTHORIZED);
          grant.renew(fresh.grant);
        },
        (err: Error & { code?: string }) => {
          if (err.code === "UNAUTHORIZED" || err.code === "TOKEN_EXPIRED" || err.code === "API_KEY_EXPIRED")
            return session.end(err.code, `renew: ${err.message}`, EXEC_CLOSE_CODES.UNAUTHORIZED);
          // An API key without the deploy scope could not have opened the session: it cannot keep it open either.
          if (err.code === "INSUFFICIENT_SCOPE") return session.end("UNAUTHORIZED", `renew: ${err.message}`, EXEC_CLOSE_CODES.UNAUTHORIZED);
          // The check itself failed (the database): the session keeps the grant it has, and ends at its expiry unless a later renew is checked.
          log.warn("could not check an exec session's renewed token", { err });
        },
      );
    const startTimer = setTimeout(() => bad(`no start message within ${EXEC_START_TIMEOUT_MS / 1000} s`), EXEC_START_TIMEOUT_MS);

    client.on("message", (raw, isBinary) => {
      const data = toBuffer(raw);
      if (!execId) {
        activeAtMs = Date.now();
        const start = isBinary ? undefined : parseFrame(ExecStart, data.toString("utf8"));
        if (!start?.ok) return bad(`the first message must be {"type":"start","command":[...]}${start ? `: ${start.error}` : ""}`);
        clearTimeout(startTimer);
        execId = randomBytes(16).toString("hex");
        return this.open(execId, target, start.frame, log).then(
          (ws) => {
            if (ended) return void ws.close(EXEC_CLOSE_CODES.NORMAL);
            agent = ws;
            relayAgent(ws);
            for (const m of early.splice(0)) ws.send(m.data, { binary: m.isBinary });
            if (client.isPaused) client.resume();
          },
          (err: Error) => session.end("NODE_UNREACHABLE", err.message),
        );
      }
      const renewal = isBinary ? undefined : parseFrame(ExecRenew, data.toString("utf8"));
      if (renewal?.ok) {
        // What the client sends after a renew is read once it is checked: an expiry right after it cannot cut the session.
        client.pause();
        return void renew(renewal.frame.accessToken).finally(() => ended || client.resume());
      }
      // A renew is not use: the SDK sends one every refresh, which would keep an abandoned shell open for good.
      activeAtMs = Date.now();
      const problem = checkInput(data, isBinary);
      if (problem) return bad(problem);
      if (agent) return forward(client, agent, data, isBinary);
      early.push({ data, isBinary });
      earlyBytes += data.length;
      // Read no more of the client until the agent is there to take it.
      if (earlyBytes > EARLY_INPUT_BYTES) client.pause();
    });
    client.on("close", () => {
      ended = true;
      agent?.close(EXEC_CLOSE_CODES.NORMAL);
      cleanup();
    });
    client.on("error", () => client.terminate());

    const relayAgent = (ws: WebSocket) => {
      // The agent ends a session with `exit` or `error` and closes; a close without either is a lost node.
      let said = false;
      ws.on("message", (raw, isBinary) => {
        const data = toBuffer(raw);
        activeAtMs = Date.now();
        if (!isBinary) said ||= parseFrame(ExecServerControl, data.toString("utf8")).ok;
        forward(ws, client, data, isBinary);
      });
      ws.on("close", (code) => {
        if (!said) return session.end("SESSION_ENDED", "the node's agent closed the session");
        ended = true;
        client.close(code === EXEC_CLOSE_CODES.NORMAL ? EXEC_CLOSE_CODES.NORMAL : EXEC_CLOSE_CODES.FAILED);
        cleanup();
      });
      ws.on("error", () => ws.terminate());
    };
  }

  /** Asks the node's agent to run the command and waits for its connection. */
  private open(execId: string, target: ExecTarget, start: ExecStart, log: Logger): Promise<WebSocket> {
    return new Promise<WebSocket>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.settle(execId);
        reject(new Error(`the node's agent did not open the session within ${this.o.openTimeoutMs / 1000} s`));
      }, this.o.openTimeoutMs);
      this.pending.set(execId, { nodeId: target.nodeId, resolve, timer });
      const frame: ServerFrame = {
        type: "open_exec",
        execId,
        deploymentId: target.deploymentId,
        command: start.command,
        tty: start.tty,
        ...(start.cols ? { cols: start.cols } : {}),
        ...(start.rows ? { rows: start.rows } : {}),
      };
      log.info("exec requested", { execId, tty: start.tty, argv0: start.command[0] });
      if (!this.o.sendTo(target.nodeId, frame)) {
        this.settle(execId);
        reject(new Error("the deployment's node is not connected"));
      }
    });
  }

  private settle(execId: string) {
    const p = this.pending.get(execId);
    if (p) clearTimeout(p.timer);
    this.pending.delete(execId);
  }

  close() {
    for (const s of this.sessions) s.end("SESSION_ENDED", "the control plane is shutting down");
    for (const id of [...this.pending.keys()]) this.settle(id);
    this.clients.close();
    this.agents.close();
  }
}

/** What is wrong with a client's message after `start`, or undefined. */
function checkInput(data: Buffer, isBinary: boolean): string | undefined {
  if (isBinary) return data[0] === EXEC_CHANNEL.stdin ? undefined : "binary messages from the client carry stdin: their first byte must be 0";
  const parsed = parseFrame(ExecClientControl, data.toString("utf8"));
  return parsed.ok ? undefined : `not a resize, stdin_end or renew message: ${parsed.error}`;
}

/** Passes a message on, pausing its sender while the receiver is far behind. */
function forward(from: WebSocket, to: WebSocket, data: Buffer, isBinary: boolean) {
  if (to.readyState !== WebSocket.OPEN) return;
  to.send(data, { binary: isBinary });
  if (to.bufferedAmount <= RELAY_BUFFER_BYTES || from.isPaused) return;
  from.pause();
  whenSendBufferBelow(to, RELAY_BUFFER_BYTES / 2, () => from.resume());
}

export function toBuffer(raw: RawData): Buffer {
  return Array.isArray(raw) ? Buffer.concat(raw) : Buffer.isBuffer(raw) ? raw : Buffer.from(raw);
}
