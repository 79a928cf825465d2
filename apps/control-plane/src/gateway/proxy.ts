import http from "node:http";
import type net from "node:net";
import type { Duplex } from "node:stream";
import { GATEWAY_ERROR_HEADER } from "@cm/protocol";
import type { Logger } from "../services/logger";
import { GatewayAnswers } from "./answers";
import { createConnectionRouter, interceptConnections } from "./connections";
import { failureBytes, failureOf, failureResponse, mayResend, openTunnel } from "./forwarding";
import { endpointLabel, forwardRequestHeaders, forwardResponseHeaders } from "./headers";
import { headEnd, parseRequestHead } from "./http1";
import type { GatewayFailure } from "./pages";
import type { EndpointResolver, GatewayTimeouts, TunnelDialer } from "./ports";
import { relayable } from "./relay-core";

/**
 * The tunnel of one client connection that Node's HTTP server holds, to one
 * endpoint: as the relay keeps one per connection, this keeps one (Node's
 * HTTP client sends the connection's requests on it one after another), and
 * opens it again, the endpoint looked up again, after the container closed it.
 */
class ConnectionTunnel extends http.Agent {
  constructor(private readonly open: () => Promise<Duplex>) {
    super({ keepAlive: true, maxSockets: 1, maxFreeSockets: 1 });
  }
  override createConnection(_o: unknown, cb: (err: Error | null, s?: Duplex) => void) {
    this.open().then(
      (s) => cb(null, s),
      (err: Error) => cb(err),
    );
    return undefined as never;
  }
  /** No request on it or waiting for it. */
  idle() {
    return Object.keys(this.sockets).length === 0 && Object.keys(this.requests).length === 0;
  }
}

export function createGateway(o: {
  domain: string;
  resolver: EndpointResolver;
  dialer: TunnelDialer;
  timeouts: GatewayTimeouts;
  log: Logger;
  secure: boolean;
}) {
  const answers = new GatewayAnswers();
  // Per client connection, its tunnel for each endpoint it asked for.
  const tunnels = new Map<net.Socket, Map<string, ConnectionTunnel>>();
  const tunnelFor = (socket: net.Socket, label: string) => {
    let mine = tunnels.get(socket);
    if (!mine) {
      const created = new Map<string, ConnectionTunnel>();
      mine = created;
      tunnels.set(socket, created);
      socket.once("close", () => {
        for (const t of created.values()) t.destroy();
        tunnels.delete(socket);
      });
    }
    let t = mine.get(label);
    if (!t) {
      // The connection moved to another endpoint: the tunnels it left, when idle, go (the relay holds one at a time too).
      for (const [l, other] of mine) {
        if (!other.idle()) continue;
        other.destroy();
        mine.delete(l);
      }
      t = new ConnectionTunnel(() => openTunnel(o, label));
      mine.set(label, t);
    }
    return t;
  };

  function fail(res: http.ServerResponse, kind: GatewayFailure, detail?: string) {
    if (res.headersSent) return void res.destroy();
    const f = failureResponse(kind, detail);
    answers.add("gateway", f.status);
    res.writeHead(f.status, Object.fromEntries(f.headers)).end(f.html);
  }

  const clientOf = (req: http.IncomingMessage) => ({
    ip: req.socket.remoteAddress ?? "",
    proto: (o.secure ? "https" : "http") as "http" | "https",
    host: req.headers.host ?? "",
  });

  /**
   * An endpoint request on a connection Node's HTTP server holds: Node parsed
   * it and its HTTP client sends it, over the connection's tunnel, opened,
   * sent again and failed as the relay does (forwarding.ts).
   */
  function handleRequest(req: http.IncomingMessage, res: http.ServerResponse) {
    const label = endpointLabel(req.headers.host, o.domain)!;
    const method = req.method ?? "";
    const bodyless = req.headers["transfer-encoding"] === undefined && Number(req.headers["content-length"] ?? 0) === 0;
    const agent = tunnelFor(req.socket, label);
    const send = (firstTry: boolean) => {
      const upstream = http.request({ agent, method, path: req.url, headers: forwardRequestHeaders(req.headers, clientOf(req)) });
      let timedOut = false;
      const firstByte = setTimeout(() => {
        timedOut = true;
        upstream.destroy();
        fail(res, "timeout", `no response within ${o.timeouts.responseMs / 1000} s`);
      }, o.timeouts.responseMs);
      upstream.setTimeout(o.timeouts.idleMs, () => upstream.destroy(new Error("idle")));
      upstream.on("response", (up) => {
        clearTimeout(firstByte);
        // Node's HTTP client lets through what its server refuses to send (a status
        // under 100, control characters in the reason or a header value), and a throw
        // here would take the process down: the container's answer is then a 502.
        const status = up.statusCode ?? 0;
        const reason = /^[\t\x20-\x7e\x80-\xff]*$/.test(up.statusMessage ?? "") ? up.statusMessage : undefined;
        try {
          if (status < 200) throw new Error(`the container answered with status ${status}`);
          res.writeHead(status, reason, forwardResponseHeaders(up.headers));
          answers.add("container", status);
        } catch (err) {
          upstream.destroy();
          return fail(res, "port_not_ready", `the container's response could not be sent on: ${(err as Error).message}`);
        }
        // A response of unknown length (server-sent events, chunked streams) gets its
        // headers at once; one with a length goes out with its body in one write.
        if (up.headers["content-length"] === undefined) res.flushHeaders();
        up.pipe(res);
        up.on("error", () => res.destroy());
      });
      upstream.on("error", (err) => {
        clearTimeout(firstByte);
        if (timedOut) return; // the 504 page is already on its way
        // Node's client sends one request at a time on a tunnel: it is alone there.
        const again = mayResend({ method, bodyless, reusedTunnel: upstream.reusedSocket, aloneOnTunnel: true, firstTry });
        // The dead tunnel has left the agent (or leaves it before the agent picks one for this): it opens a new one.
        if (again && !res.headersSent && !res.destroyed) return send(false);
        const f = failureOf(err);
        fail(res, f.kind, f.detail);
      });
      // The client went away: stop the upstream request too.
      res.on("close", () => {
        if (!res.writableFinished) upstream.destroy();
      });
      if (bodyless) upstream.end();
      else req.pipe(upstream);
    };
    if (bodyless) req.resume();
    send(true);
  }

  const router = createConnectionRouter({ ...o, answers, timeouts: { keepAliveMs: 5_000, headersMs: 60_000, ...o.timeouts } });

  /**
   * An upgrade on a connection Node's HTTP server holds (one that began with
   * an API request): the connection goes to the byte relay, its request
   * rebuilt from what the server parsed, so that the container's answer, a
   * 101 or a refusal, leaves through the same response filter as every other
   * (forwardResponseHead), and what follows a refusal is read as HTTP again.
   */
  async function handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer) {
    // Node's HTTP server takes its own 'error' listener off an upgraded socket: a
    // reset while the endpoint is looked up must not crash the process.
    socket.on("error", () => socket.destroy());
    const label = endpointLabel(req.headers.host, o.domain)!;
    let text = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`;
    for (let i = 0; i < req.rawHeaders.length; i += 2) text += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
    const bytes = Buffer.concat([Buffer.from(`${text}\r\n`, "latin1"), head]); // header strings hold one byte per character
    // What the relay would not take (two Hosts, an unclear length, HTTP/1.0) it would hand back to this server: refused here instead.
    if (relayable(parseRequestHead(bytes, headEnd(bytes)), o.domain)?.label !== label) {
      answers.add("gateway", 400);
      return void socket.end(
        `HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\n${GATEWAY_ERROR_HEADER}: BAD_REQUEST\r\nconnection: close\r\n\r\nBAD_REQUEST\r\n`,
      );
    }
    const r = await o.resolver.resolve(label);
    if (socket.destroyed) return; // the client went away while we looked
    if (r.kind !== "ok") {
      const page = failureBytes(r.kind);
      answers.add("gateway", page.status);
      return void socket.end(page.bytes);
    }
    router.relay(socket as net.Socket, bytes, label, r.target);
  }

  return {
    /** Endpoint requests answered, by status class: for /metrics. */
    answers,
    /**
     * Gives connections whose first request is for a running endpoint to the
     * byte relay, before the server's HTTP parser sees them; handleRequest and
     * handleUpgrade below serve endpoint requests on every other connection.
     */
    intercept: (server: http.Server) => interceptConnections(server, router),
    /** Whether a request's Host is one of the gateway's endpoint hosts. */
    owns: (host: string | undefined) => endpointLabel(host, o.domain) !== undefined,
    handleRequest: (req: http.IncomingMessage, res: http.ServerResponse) => {
      try {
        handleRequest(req, res);
      } catch (err) {
        o.log.error("gateway request failed", { err });
        fail(res, "port_not_ready");
      }
    },
    handleUpgrade: (req: http.IncomingMessage, socket: Duplex, head: Buffer) => handleUpgrade(req, socket, head).catch(() => socket.destroy()),
    /** Closes what the gateway holds: the relay's client connections (the HTTP server does not know them) and the tunnels of the ones it does. */
    close() {
      router.close();
      for (const mine of tunnels.values()) for (const t of mine.values()) t.destroy();
      tunnels.clear();
    },
  };
}
export type Gateway = ReturnType<typeof createGateway>;
