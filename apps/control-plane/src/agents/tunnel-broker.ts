import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type net from "node:net";
import type { Duplex } from "node:stream";
import type { Repos } from "@cm/db";
import { AGENT_TUNNEL_UPGRADE, type ArchiveErrorCode, type ServerFrame, TUNNEL_SWITCHING_PROTOCOLS } from "@cm/protocol";
import { createWebSocketStream, type WebSocket, WebSocketServer } from "ws";
import { DialError, type EndpointTarget, type TunnelDialer } from "../gateway/ports";
import { asSocketLike } from "../gateway/socket-like";
import type { EventBus } from "../services/events";
import { hashSecret } from "../services/ids";

/**
 * What a tunnel carries: a connection to a container's port, which ends when the
 * deployment stops running, or a container's archive (the files route), which
 * is read from a stopped container too and ends only when the deployment is deleted.
 */
type Carries = "port" | "archive";
type Pending = { nodeId: string; deploymentId: string; carries: Carries; resolve(s: Duplex): void; reject(e: Error): void; timer: NodeJS.Timeout };
type Open = { deploymentId: string; carries: Carries };

/** The agent could not read a container's path (its tunnel_error's code), in the agent's words. */
export class ArchiveError extends Error {
  constructor(
    readonly code: ArchiveErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** A container's path to read as a tar archive, through its node's agent. */
export type ArchiveTarget = { nodeId: string; deploymentId: string; path: string };

export type TunnelBrokerOptions = {
  repos: Repos;
  events: EventBus;
  /** Sends a frame on the node's control connection; false when it has none. */
  sendTo(nodeId: string, frame: ServerFrame): boolean;
  /** How long the agent has to connect back (or say it cannot). */
  openTimeoutMs: number;
  /** A tunnel with no traffic either way for this long is closed. */
  idleMs: number;
};

/**
 * Opens tunnels to containers through their node's agent: asks over the
 * control connection, then waits for the agent's own connection carrying the
 * bytes. Each connection gets its own socket, so one large transfer never
 * queues in front of the node's heartbeats, commands or other tunnels.
 */
export class TunnelBroker implements TunnelDialer {
  private readonly pending = new Map<string, Pending>();
  // WebSocket tunnels (agents before 0.2) carry one socket read per frame, 64 KiB at most:
  // a larger frame is no agent's, and would only hold memory.
  private readonly wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 1024 * 1024 });
  /** Open tunnels, with the deployment each reaches. */
  private readonly open = new Map<{ destroy(): void } | WebSocket, Open>();

  constructor(private readonly o: TunnelBrokerOptions) {
    o.events.on("tunnel-error", (tunnelId, nodeId, reason, code) => {
      const p = this.pending.get(tunnelId);
      if (!p || p.nodeId !== nodeId) return;
      this.settle(tunnelId);
      p.reject(p.carries === "archive" ? new ArchiveError(code ?? "ARCHIVE_FAILED", reason) : new DialError("port_not_ready", reason));
    });
    // Billing ends at the stop, so does the way in: a kept-alive connection (or a
    // WebSocket) must not reach the container until its agent has stopped it.
    // A read of its files goes on until the deployment is deleted: its container is removed then.
    o.events.on("deployment-changed", (d) => {
      if (d.status !== "running" || d.deletedAt !== null) this.closeDeployment(d.id, d.deletedAt !== null ? "deleted" : d.status);
    });
  }

  dial(target: EndpointTarget): Promise<Duplex> {
    return this.ask(target, "port", (tunnelId) => ({ type: "open_tunnel", tunnelId, deploymentId: target.deploymentId, port: target.port }));
  }

  /**
   * A container's path as a tar archive, running or not: the agent reads it with
   * the engine's archive API and writes it on a tunnel of its own, then ends it.
   * Rejects with ArchiveError when the agent says it cannot, DialError
   * node_unreachable when it does not answer. Destroying the stream ends the read.
   */
  readArchive(target: ArchiveTarget): Promise<Duplex> {
    return this.ask(target, "archive", (tunnelId) => ({ type: "open_archive", tunnelId, deploymentId: target.deploymentId, path: target.path }));
  }

  private ask(target: { nodeId: string; deploymentId: string }, carries: Carries, frame: (tunnelId: string) => ServerFrame): Promise<Duplex> {
    const tunnelId = randomBytes(16).toString("hex");
    return new Promise<Duplex>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.settle(tunnelId);
        reject(new DialError("node_unreachable", `the node did not open a tunnel within ${this.o.openTimeoutMs / 1000} s`));
      }, this.o.openTimeoutMs);
      this.pending.set(tunnelId, { nodeId: target.nodeId, deploymentId: target.deploymentId, carries, resolve, reject, timer });
      if (!this.o.sendTo(target.nodeId, frame(tunnelId))) {
        this.settle(tunnelId);
        reject(new DialError("node_unreachable", "the node's agent is not connected"));
      }
    });
  }

  /** `GET /agent/tunnel?id=...` from an agent, with its token: the other half of a dial. */
  handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    void this.accept(req, socket, head).catch(() => socket.destroy());
  };

  private async accept(req: IncomingMessage, socket: Duplex, head: Buffer) {
    const id = new URL(req.url ?? "/", "http://x").searchParams.get("id") ?? "";
    const token = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? "")?.[1];
    const p = this.pending.get(id);
    const node = token ? await this.o.repos.nodes.byAgentTokenHash(hashSecret(token)) : undefined;
    // Only the node that was asked may answer: another node's agent cannot
    // splice itself into a tenant's connection by guessing or replaying an id.
    if (!p || !node || node.id !== p.nodeId) {
      socket.end("HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    this.settle(id);
    const open: Open = { deploymentId: p.deploymentId, carries: p.carries };
    if (String(req.headers.upgrade ?? "").toLowerCase() === AGENT_TUNNEL_UPGRADE) return p.resolve(this.rawTunnel(socket as net.Socket, head, open));
    // Agents before 0.2 carry the bytes in WebSocket messages.
    this.wss.handleUpgrade(req, socket, head, (ws) => p.resolve(this.webSocketTunnel(ws, open)));
  }

  private rawTunnel(socket: net.Socket, head: Buffer, open: Open): Duplex {
    socket.write(TUNNEL_SWITCHING_PROTOCOLS);
    socket.setNoDelay(true);
    if (head.length) socket.unshift(head);
    // Whoever uses the tunnel may set its own timeout on it; any that fires ends it.
    socket.setTimeout(this.o.idleMs);
    socket.on("timeout", () => socket.destroy());
    this.open.set(socket, open);
    socket.on("close", () => this.open.delete(socket));
    return asSocketLike(socket);
  }

  private webSocketTunnel(ws: WebSocket, open: Open): Duplex {
    this.open.set(ws, open);
    ws.on("close", () => this.open.delete(ws));
    let idle = setTimeout(() => ws.terminate(), this.o.idleMs);
    const touch = () => {
      clearTimeout(idle);
      idle = setTimeout(() => ws.terminate(), this.o.idleMs);
    };
    ws.on("message", touch);
    ws.on("close", () => clearTimeout(idle));
    const stream = asSocketLike(createWebSocketStream(ws));
    const write = stream.write.bind(stream);
    stream.write = ((chunk: unknown, ...rest: unknown[]) => (touch(), write(chunk as Buffer, ...(rest as [])))) as typeof stream.write;
    return stream;
  }

  private settle(tunnelId: string) {
    const p = this.pending.get(tunnelId);
    if (p) clearTimeout(p.timer);
    this.pending.delete(tunnelId);
  }

  /** Ends a deployment's tunnels, open and opening, to its ports (or, once deleted, all): whoever uses one sees it close. */
  private closeDeployment(deploymentId: string, status: string) {
    const ends = (o: Open) => o.deploymentId === deploymentId && (o.carries === "port" || status === "deleted");
    for (const [id, p] of this.pending) {
      if (!ends(p)) continue;
      this.settle(id);
      p.reject(
        p.carries === "archive" ? new ArchiveError("NO_CONTAINER", "the deployment was deleted") : new DialError("not_running", `the deployment is ${status}`),
      );
    }
    for (const [t, o] of this.open) if (ends(o)) end(t);
  }

  close() {
    for (const [id, p] of this.pending) {
      this.settle(id);
      p.reject(new DialError("node_unreachable", "the control plane is shutting down"));
    }
    for (const t of this.open.keys()) end(t);
    this.wss.close();
  }
}

const end = (t: { destroy(): void } | WebSocket) => ("terminate" in t ? t.terminate() : t.destroy());
