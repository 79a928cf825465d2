import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { ExecRenew, parseFrame, TCP_CLOSE_CODES, TCP_MAX_MESSAGE_BYTES, TCP_SUBPROTOCOL, whenSendBufferBelow } from "@cm/protocol";
import { WebSocket, WebSocketServer } from "ws";
import type { AccessGrant } from "../services/auth-service";
import type { EventBus } from "../services/events";
import type { GrantWatch } from "../services/grant-watch";
import { type ExecTarget, toBuffer } from "./exec-broker";

export type TcpForwarderOptions = {
  events: EventBus;
  /** Ends a connection when the sign-in that opened it is over. */
  grants: GrantWatch;
  /** What a `renew`'s access token grants (the auth service's check), or why it grants nothing. */
  authenticate(accessToken: string): Promise<{ grant: AccessGrant }>;
};

/** Who the connection is for, as the route checked it, with the tunnel it dialled and the slot it holds. */
export type TcpTarget = ExecTarget & { port: number; tunnel: Duplex; slot: TcpSlot };
/** One of a deployment's TCP connections, counted from the route's check until its socket closes. */
export type TcpSlot = { release(): void };

/** What the client may have queued here before the container's side is paused. */
const RELAY_BUFFER_BYTES = 1024 * 1024;
/** Pings keep proxies from closing a connection nobody types in (an ssh session at rest). */
const PING_INTERVAL_MS = 30_000;

type Connection = { deploymentId: string; end(code: number, reason: string): void };

/**
 * Tenants' raw TCP connections to their containers (`cm port-forward`,
 * `cm ssh`): the route checks who asks and dials the container's port through
 * the tunnel broker; this relays the WebSocket's binary messages to the tunnel
 * and the tunnel's bytes back, each side paused while the other is far behind.
 * The tunnel's own idle timeout (the broker's idleMs) ends a connection with
 * no byte either way.
 */
export class TcpForwarder {
  private readonly clients = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: TCP_MAX_MESSAGE_BYTES,
    // Only ever ours: a `bearer.<token>` protocol is never echoed back.
    handleProtocols: (protocols) => (protocols.has(TCP_SUBPROTOCOL) ? TCP_SUBPROTOCOL : false),
  });
  private readonly countOf = new Map<string, number>();
  private readonly connections = new Set<Connection>();
  private readonly requestIds = new WeakMap<IncomingMessage, string>();

  constructor(private readonly o: TcpForwarderOptions) {
    this.clients.on("headers", (headers, req) => {
      const id = this.requestIds.get(req);
      if (id) headers.push(`X-Request-Id: ${id}`);
    });
    // The broker closes the tunnels too; this says why, before their close reads as the container's.
    o.events.on("deployment-changed", (d) => {
      if (d.status === "running") return;
      for (const c of this.connections) if (c.deploymentId === d.id) c.end(TCP_CLOSE_CODES.ENDED, `deployment ${d.status}`);
    });
  }

  /** The deployment's connections open or opening now: what the route's cap counts. */
  connectionsOf(deploymentId: string): number {
    return this.countOf.get(deploymentId) ?? 0;
  }

  /**
   * Counts a connection from the route's check on, before its tunnel is dialled,
   * so that a burst of opens cannot all pass the cap; released once, on any path.
   */
  reserve(deploymentId: string): TcpSlot {
    this.countOf.set(deploymentId, this.connectionsOf(deploymentId) + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        const left = this.connectionsOf(deploymentId) - 1;
        if (left > 0) this.countOf.set(deploymentId, left);
        else this.countOf.delete(deploymentId);
      },
    };
  }

  /** Takes a client's connection once the route has checked it and dialled the container. */
  acceptClient(req: IncomingMessage, socket: Duplex, head: Buffer, target: TcpTarget) {
    this.requestIds.set(req, target.requestId);
    const done = () => {
      target.slot.release();
      target.tunnel.destroy();
    };
    // The client gave up while the container was dialled.
    if (socket.destroyed) return done();
    // The socket's close is the one end every path has, a handshake that never completes included.
    socket.once("close", done);
    this.clients.handleUpgrade(req, socket, head, (ws) => this.run(ws, target));
  }

  private run(ws: WebSocket, target: TcpTarget) {
    const { tunnel } = target;
    const log = target.log.child({ deploymentId: target.deploymentId, port: target.port });
    let ended = false;
    let idle = false;
    const ping = setInterval(() => ws.ping(), PING_INTERVAL_MS);
    const connection: Connection = {
      deploymentId: target.deploymentId,
      end: (code, reason) => {
        if (ended) return;
        ended = true;
        cleanup();
        if (ws.readyState === WebSocket.OPEN) ws.close(code, reason);
        else ws.terminate();
        tunnel.destroy();
      },
    };
    const cleanup = () => {
      clearInterval(ping);
      grant.release();
      this.connections.delete(connection);
    };
    this.connections.add(connection);
    const grant = this.o.grants.hold(target.grant, (why) => connection.end(TCP_CLOSE_CODES.UNAUTHORIZED, why.code));
    log.info("tcp connection opened");

    tunnel.on("data", (chunk: Buffer) => {
      if (ws.readyState !== WebSocket.OPEN) return;
      ws.send(chunk, { binary: true });
      if (ws.bufferedAmount <= RELAY_BUFFER_BYTES || tunnel.isPaused()) return;
      tunnel.pause();
      whenSendBufferBelow(ws, RELAY_BUFFER_BYTES / 2, () => ended || tunnel.resume());
    });
    // The broker's tunnel ends itself after its idle time; the close that follows is then no hang-up of the container's.
    tunnel.once("timeout", () => {
      idle = true;
    });
    tunnel.on("error", () => tunnel.destroy());
    tunnel.once("close", () =>
      idle ? connection.end(TCP_CLOSE_CODES.IDLE, "idle timeout") : connection.end(TCP_CLOSE_CODES.NORMAL, "the container closed the connection"),
    );

    ws.on("message", (raw, isBinary) => {
      const data = toBuffer(raw);
      if (!isBinary) return void this.renew(data, target, grant, connection);
      if (tunnel.write(data) || ws.isPaused) return;
      // Read no more of the client until the container has taken what it sent.
      ws.pause();
      tunnel.once("drain", () => ended || ws.resume());
    });
    ws.on("close", () => {
      if (!ended) log.info("tcp connection closed by the client");
      ended = true;
      cleanup();
      tunnel.destroy();
    });
    ws.on("error", () => ws.terminate());
  }

  /** A text message is a `renew` (as on an exec session): a fresh token of the same account moves the connection's end to its expiry. */
  private renew(data: Buffer, target: TcpTarget, grant: { renew(g: AccessGrant): void }, connection: Connection) {
    const renewal = parseFrame(ExecRenew, data.toString("utf8"));
    if (!renewal.ok) return connection.end(TCP_CLOSE_CODES.BAD_MESSAGE, "text messages are renew only");
    this.o.authenticate(renewal.frame.accessToken).then(
      (fresh) => {
        if (fresh.grant.userId !== target.grant.userId) return connection.end(TCP_CLOSE_CODES.UNAUTHORIZED, "UNAUTHORIZED");
        grant.renew(fresh.grant);
      },
      (err: Error & { code?: string }) => {
        if (err.code === "UNAUTHORIZED" || err.code === "TOKEN_EXPIRED" || err.code === "API_KEY_EXPIRED" || err.code === "INSUFFICIENT_SCOPE")
          return connection.end(TCP_CLOSE_CODES.UNAUTHORIZED, err.code);
        // The check itself failed (the database): the connection keeps its grant, and ends at its expiry unless a later renew is checked.
        target.log.warn("could not check a tcp connection's renewed token", { err });
      },
    );
  }

  close() {
    for (const c of this.connections) c.end(TCP_CLOSE_CODES.ENDED, "the control plane is shutting down");
    this.clients.close();
  }
}
