import type http from "node:http";
import https from "node:https";
import type net from "node:net";
import { headEnd, MAX_HEAD_BYTES, parseRequestHead } from "./http1";
import type { EndpointTarget } from "./ports";
import { Relay } from "./relay";
import { type RelayOptions, relayable } from "./relay-core";

type Router = {
  take(socket: net.Socket, toHttp: (s: net.Socket) => void): void;
  /** Relays a connection the HTTP server has let go (an upgrade), from `bytes` (its request, rebuilt) on. */
  relay(socket: net.Socket, bytes: Buffer, label: string, target: EndpointTarget): void;
  close(): void;
};

/**
 * Looks at the first request head of each connection: a request for an
 * endpoint that is running gets the byte relay (relay.ts); everything else
 * (the API, an unknown or stopped endpoint, a head it cannot read) goes to
 * Node's HTTP server with its bytes put back, as if nothing had looked.
 */
export function createConnectionRouter(o: Omit<RelayOptions, "reroute">): Router {
  // Connections being looked at or relayed: the HTTP server neither counts nor
  // closes them, so shutting down must (server.close() would wait for them).
  const held = new Set<net.Socket>();
  const hold = (socket: net.Socket) => {
    if (held.has(socket)) return;
    held.add(socket);
    socket.once("close", () => held.delete(socket));
  };
  // Which HTTP server a connection came through: where a relay started at an upgrade hands it back.
  const servers = new WeakMap<net.Socket, (s: net.Socket) => void>();
  const take = (socket: net.Socket, toHttp: (s: net.Socket) => void) => {
    let buf: Buffer | undefined;
    servers.set(socket, toHttp);
    // No whole first head within headersMs (nor an answer about its endpoint): let go, as Node's headersTimeout does.
    const timer = setTimeout(() => socket.destroy(), o.timeouts.headersMs);
    hold(socket);
    const give = () => {
      clearTimeout(timer);
      if (socket.destroyed) return;
      held.delete(socket);
      socket.off("error", onError); // the HTTP server has its own
      if (buf) socket.unshift(buf);
      toHttp(socket);
      // Paused while we looked; the HTTP server reads the bytes put back first.
      socket.resume();
    };
    const stop = () => {
      socket.off("data", onData);
      socket.off("end", onEnd);
      socket.off("close", onClose);
      socket.pause();
    };
    // A reset while looking (or while the endpoint is looked up) must not crash the process.
    const onError = () => socket.destroy();
    const onClose = () => clearTimeout(timer);
    const onEnd = () => {
      stop();
      give();
    };
    const onData = (chunk: Buffer) => {
      buf = buf ? Buffer.concat([buf, chunk]) : chunk;
      const end = headEnd(buf);
      if (end < 0 && buf.length <= MAX_HEAD_BYTES) return;
      stop();
      // The relay's own test for each request: a head whose framing is unclear goes to Node's strict parser.
      const label = relayable(end < 0 ? undefined : parseRequestHead(buf, end), o.domain)?.label;
      if (!label) return give();
      o.resolver.resolve(label).then(
        (r) => {
          if (socket.destroyed) return;
          if (r.kind !== "ok") return give();
          clearTimeout(timer);
          socket.off("error", onError); // the relay has its own
          new Relay(socket, buf!, label, r.target, { ...o, reroute: (s) => take(s, toHttp) });
        },
        () => give(),
      );
    };
    socket.on("data", onData);
    socket.on("end", onEnd);
    socket.on("error", onError);
    socket.on("close", onClose);
    socket.resume(); // a connection routed afresh comes paused
  };
  return {
    take,
    relay(socket, bytes, label, target) {
      hold(socket);
      const toHttp = servers.get(socket);
      // A server the router is not in front of cannot be handed a connection back: it closes after its last answer.
      const reroute = toHttp ? (s: net.Socket) => take(s, toHttp) : (s: net.Socket) => void s.end(() => s.destroy());
      new Relay(socket, bytes, label, target, { ...o, reroute });
    },
    close() {
      for (const s of held) s.destroy();
      held.clear();
    },
  };
}

/**
 * Puts the router in front of a listening HTTP(S) server's own connection
 * handling. Node documents handing a connection to an HTTP server by emitting
 * 'connection'; this is the same, with its handler called directly (an HTTPS
 * server's is on 'secureConnection', after the TLS handshake).
 */
export function interceptConnections(server: http.Server, router: Router) {
  const event = server instanceof https.Server ? "secureConnection" : "connection";
  const handlers = server.listeners(event) as Array<(s: net.Socket) => void>;
  server.removeAllListeners(event);
  const toHttp = (s: net.Socket) => {
    for (const h of handlers) h.call(server, s);
  };
  server.on(event, (socket: net.Socket) => router.take(socket, toHttp));
}
