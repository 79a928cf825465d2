// A control plane small enough to read: a real `ws` server on port 0 that speaks
// the agent protocol, stores log lines the way the real one does (by seq, acking
// each frame), sends a sync built from what it stored after every welcome, and
// takes the agent's tunnel connections on /agent/tunnel.

import type { Server } from "node:http";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import type { DeploymentSpec, LogCursor, LogLineFrame, ServerFrame } from "@cm/protocol";
import {
  AGENT_TUNNEL_PATH,
  AGENT_TUNNEL_UPGRADE,
  AGENT_WHOAMI_PATH,
  AGENT_WS_PATH,
  AgentFrame,
  CLOSE_CODES,
  parseFrame,
  retiredCloseReason,
  TUNNEL_SWITCHING_PROTOCOLS,
} from "@cm/protocol";
import type { WebSocket } from "ws";
import { WebSocketServer } from "ws";

type Frame<T extends AgentFrame["type"]> = Extract<AgentFrame, { type: T }>;

export interface FakeControlPlaneOptions {
  /** token -> node id */
  tokens?: Record<string, string>;
  heartbeatIntervalMs?: number;
  /** listen on this port (to come back on the same address after stop()) */
  port?: number;
}

export const TEST_TOKEN = "test-token";
export const TEST_NODE_ID = "node-test";

export class FakeControlPlane {
  /** every parsed frame from every connection, in arrival order */
  readonly frames: AgentFrame[] = [];
  readonly badFrames: string[] = [];
  /** stored log lines per deployment, in seq order, as the real control plane keeps them */
  readonly logs = new Map<string, LogLineFrame[]>();
  /** lines received again with a seq already stored */
  duplicateLines = 0;
  /** sockets closeAgent() closed: their late frames are not read */
  private readonly hungUp = new WeakSet<WebSocket>();
  /** false: logs frames are dropped unstored and unacknowledged, like frames lost when an agent dies */
  storeLogs = true;
  /** the desired state, sent as a sync after each welcome */
  readonly desired = new Map<string, DeploymentSpec>();
  healthStatus = 200;
  hellos = 0;
  /** token lookups (GET AGENT_WHOAMI_PATH) answered */
  whoamis = 0;
  /** how long tunnel connections wait for their 101 (a slow control plane) */
  tunnelAnswerDelayMs = 0;
  /** what the next hello is answered with instead of welcome: a close code */
  refuseNextWith: number | undefined;
  private socket: WebSocket | undefined;
  private commandSeq = 0;
  /** tunnel sockets the agent opened, by tunnel id, with the token they came with */
  readonly tunnels = new Map<string, { socket: Duplex; authorization: string | undefined }>();

  private constructor(
    private server: Server,
    private wss: WebSocketServer,
    readonly port: number,
    private readonly options: FakeControlPlaneOptions,
  ) {}

  static async start(options: FakeControlPlaneOptions = {}): Promise<FakeControlPlane> {
    const { server, wss, port } = await listen(options.port ?? 0);
    const fake = new FakeControlPlane(server, wss, port, options);
    fake.attach();
    return fake;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get connected(): boolean {
    return this.socket?.readyState === 1;
  }

  of<T extends AgentFrame["type"]>(type: T): Frame<T>[] {
    return this.frames.filter((frame): frame is Frame<T> => frame.type === type);
  }

  statuses(deploymentId: string): Frame<"status">[] {
    return this.of("status").filter((frame) => frame.deploymentId === deploymentId);
  }

  storedLines(deploymentId: string): LogLineFrame[] {
    return this.logs.get(deploymentId) ?? [];
  }

  cursor(deploymentId: string): LogCursor {
    const last = this.storedLines(deploymentId).at(-1);
    return last ? { seq: last.seq, dockerTs: last.ts } : { seq: 0, dockerTs: null };
  }

  /** The spec as the control plane would send it now, with its stored cursor. */
  spec(deploymentId: string): DeploymentSpec {
    const spec = this.desired.get(deploymentId);
    if (!spec) throw new Error(`no desired state for ${deploymentId}`);
    return { ...spec, logCursor: this.cursor(deploymentId) };
  }

  send(frame: ServerFrame | Record<string, unknown>): void {
    this.sendRaw(JSON.stringify(frame));
  }

  sendRaw(text: string): void {
    if (!this.socket) throw new Error("no agent connected");
    this.socket.send(text);
  }

  sync(): void {
    this.send({ type: "sync", deployments: [...this.desired.keys()].map((id) => this.spec(id)) });
  }

  /** Updates the desired state and sends a command for it; returns the command id to await the ack. */
  command(action: "create" | "start" | "stop" | "remove", spec: DeploymentSpec): string {
    this.desired.set(spec.deploymentId, spec);
    const commandId = `cmd-${++this.commandSeq}`;
    this.send({ type: "command", commandId, action, deployment: this.spec(spec.deploymentId) });
    return commandId;
  }

  /** Asks the agent to carry a connection to the deployment's port; returns the tunnel id. */
  openTunnel(deploymentId: string, port: number): string {
    const tunnelId = `tun-${++this.commandSeq}`;
    this.send({ type: "open_tunnel", tunnelId, deploymentId, port });
    return tunnelId;
  }

  closeAgent(code: number, reason = ""): void {
    // Frames the agent sent before it saw the close still arrive; a control plane
    // that has hung up reads no more of them. Without this, a batch dropped while
    // storeLogs was off and a later one stored off the closing socket made a gap.
    if (this.socket) this.hungUp.add(this.socket);
    this.socket?.close(code, reason);
  }

  /** Stops reading from the agent's TCP connection: pings go unanswered, as on a half-open link. */
  freezeAgent(): void {
    (this.socket as unknown as { _socket: { pause(): void } } | undefined)?._socket.pause();
  }

  async waitFor<T>(check: () => T | undefined | false | null, timeoutMs = 15_000, what = "condition"): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = check();
      if (value !== undefined && value !== false && value !== null) return value;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** Goes away: the server stops listening and every agent connection is cut. */
  async stop(): Promise<void> {
    for (const client of this.wss.clients) client.terminate();
    for (const tunnel of this.tunnels.values()) tunnel.socket.destroy();
    this.socket = undefined;
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Comes back on the same port. */
  async restart(): Promise<void> {
    const { server, wss } = await listen(this.port);
    this.server = server;
    this.wss = wss;
    this.attach();
  }

  private attach(): void {
    this.server.on("request", (req, res) => {
      if (req.url === "/health") {
        res.writeHead(this.healthStatus, { "content-type": "application/json" }).end(JSON.stringify({ status: "ok" }));
      } else if (req.url === AGENT_WHOAMI_PATH) {
        this.whoamis += 1;
        const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? "")?.[1] ?? "";
        const nodeId = (this.options.tokens ?? { [TEST_TOKEN]: TEST_NODE_ID })[token];
        const body = nodeId ? { nodeId, name: "test node" } : { error: { code: "UNAUTHORIZED", message: "unknown agent token", requestId: "req_fake" } };
        res.writeHead(nodeId ? 200 : 401, { "content-type": "application/json" }).end(JSON.stringify(body));
      } else if (!res.headersSent && req.headers.upgrade === undefined) {
        res.writeHead(404).end();
      }
    });
    this.server.on("upgrade", (req, socket, head) => {
      const url = new URL(req.url ?? "/", "http://fake");
      if (url.pathname === AGENT_WS_PATH) return this.wss.handleUpgrade(req, socket, head, (ws) => this.wss.emit("connection", ws, req));
      if (url.pathname !== AGENT_TUNNEL_PATH || req.headers.upgrade !== AGENT_TUNNEL_UPGRADE) return socket.destroy();
      const answer = () => {
        socket.write(TUNNEL_SWITCHING_PROTOCOLS);
        if (head.length) socket.unshift(head);
        this.tunnels.set(url.searchParams.get("id") ?? "", { socket, authorization: req.headers.authorization });
      };
      if (this.tunnelAnswerDelayMs > 0) setTimeout(answer, this.tunnelAnswerDelayMs);
      else answer();
    });
    this.wss.on("connection", (ws) => {
      ws.on("message", (data) => this.onMessage(ws, String(data)));
      ws.on("close", () => {
        if (this.socket === ws) this.socket = undefined;
      });
    });
  }

  private onMessage(ws: WebSocket, text: string): void {
    const parsed = parseFrame(AgentFrame, text);
    if (!parsed.ok) {
      this.badFrames.push(text);
      return;
    }
    const frame = parsed.frame;
    this.frames.push(frame);
    if (frame.type === "hello") {
      this.onHello(ws, frame);
      return;
    }
    if (frame.type === "logs" && !this.hungUp.has(ws)) this.onLogs(ws, frame);
  }

  private onHello(ws: WebSocket, hello: Frame<"hello">): void {
    this.hellos += 1;
    const nodeId = (this.options.tokens ?? { [TEST_TOKEN]: TEST_NODE_ID })[hello.token];
    if (nodeId === undefined || this.refuseNextWith !== undefined) {
      const code = this.refuseNextWith ?? CLOSE_CODES.UNAUTHORIZED;
      this.refuseNextWith = undefined;
      ws.send(JSON.stringify({ type: "error", code: code === CLOSE_CODES.UNAUTHORIZED ? "UNAUTHORIZED" : "REFUSED", message: "refused by the fake" }));
      ws.close(
        code,
        code === CLOSE_CODES.UNAUTHORIZED ? "unknown token" : code === CLOSE_CODES.RETIRED ? retiredCloseReason(nodeId ?? TEST_NODE_ID) : "refused",
      );
      return;
    }
    // Like the real one: a newer connection with the same token replaces the older.
    if (this.socket && this.socket !== ws) this.socket.close(CLOSE_CODES.REPLACED, "replaced by a newer connection");
    this.socket = ws;
    this.send({ type: "welcome", protocolVersion: 1, nodeId, heartbeatIntervalMs: this.options.heartbeatIntervalMs ?? 200, serverTime: Date.now() });
    this.sync();
  }

  private onLogs(ws: WebSocket, frame: Frame<"logs">): void {
    if (!this.storeLogs) return;
    const stored = this.logs.get(frame.deploymentId) ?? [];
    this.logs.set(frame.deploymentId, stored);
    for (const line of frame.lines) {
      const lastSeq = stored.at(-1)?.seq ?? 0;
      if (line.seq <= lastSeq) this.duplicateLines += 1;
      else stored.push(line);
    }
    const last = frame.lines.at(-1)!;
    ws.send(JSON.stringify({ type: "logs_ack", deploymentId: frame.deploymentId, cursor: { seq: last.seq, dockerTs: last.ts } }));
  }
}

async function listen(port: number): Promise<{ server: Server; wss: WebSocketServer; port: number }> {
  const server = createServer();
  const wss = new WebSocketServer({ noServer: true });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  return { server, wss, port: (server.address() as AddressInfo).port };
}
