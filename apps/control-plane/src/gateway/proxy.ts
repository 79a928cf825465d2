import http from "node:http";
import type net from "node:net";
import type { Duplex } from "node:stream";
import { GATEWAY_ERROR_HEADER } from "@cm/protocol";
import type { Logger } from "../services/logger";
import { GatewayAnswers } from "./answers";
import { createConnectionRouter, interceptConnections } from "./connections";
import { endpointLabel, forwardRequestHeaders, forwardResponseHeaders } from "./headers";
import { headEnd, parseRequestHead } from "./http1";
import { failurePage, type GatewayFailure } from "./pages";
import { DialError, type EndpointResolver, type EndpointTarget, type GatewayTimeouts, RETRIABLE_METHODS, type TunnelDialer } from "./ports";
import { relayable } from "./relay-core";

/**
 * Keep-alive connections per endpoint: after the first request, the next one
 * reuses an open tunnel instead of asking the node for a new one.
 */
class TunnelAgent extends http.Agent {
  constructor(
    private readonly dialer: TunnelDialer,
    private readonly target: EndpointTarget,
  ) {
    super({ keepAlive: true, maxSockets: 256, maxFreeSockets: 16, timeout: 60_000 });
  }
  override createConnection(_o: unknown, cb: (err: Error | null, s?: Duplex) => void) {
    this.dialer.dial(this.target).then(
      (s) => cb(null, s),
      (err: Error) => cb(err),
    );
    return undefined as never;
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
  const agents = new Map<string, TunnelAgent>();
  const agentFor = (t: EndpointTarget) => {
    const key = `${t.deploymentId}:${t.port}`;
    let a = agents.get(key);
    if (!a) {
      a = new TunnelAgent(o.dialer, t);
      agents.set(key, a);
    }
    return a;
  };

  function fail(res: http.ServerResponse, kind: GatewayFailure, detail?: string) {
    if (res.headersSent) return void res.destroy();
    const page = failurePage(kind, detail);
    const headers: http.OutgoingHttpHeaders = { "content-type": "text/html; charset=utf-8", "cache-control": "no-store", [GATEWAY_ERROR_HEADER]: page.code };
    if (kind === "node_unreachable") headers["retry-after"] = "10";
    answers.add("gateway", page.status);
    res.writeHead(page.status, headers).end(page.html);
  }

  const clientOf = (req: http.IncomingMessage) => ({
    ip: req.socket.remoteAddress ?? "",
    proto: (o.secure ? "https" : "http") as "http" | "https",
    host: req.headers.host ?? "",
  });

  async function handleRequest(req: http.IncomingMessage, res: http.ServerResponse) {
    const label = endpointLabel(req.headers.host, o.domain)!;
    const r = await o.resolver.resolve(label);
    if (r.kind !== "ok") return fail(res, r.kind);
    const bodyless = req.headers["transfer-encoding"] === undefined && Number(req.headers["content-length"] ?? 0) === 0;
    // A container may close an idle keep-alive connection just as the gateway
    // reuses it (the close takes a moment to cross the tunnel). As Node's docs
    // advise, such a request is sent again once, on a new tunnel, when sending
    // it twice cannot matter: no body, a method without side effects.
    const retriable = bodyless && RETRIABLE_METHODS.has(req.method ?? "");
    const send = (retry: boolean) => {
      // The retry gets a tunnel of its own: when a container closes its idle
      // connections, every pooled tunnel to it may be dead at once.
      const connection = retry
        ? { agent: agentFor(r.target) }
        : {
            createConnection: (_opts: unknown, done: (err: Error | null, s?: Duplex) => void) =>
              void o.dialer.dial(r.target).then(
                (s) => done(null, s),
                (err: Error) => done(err),
              ),
          };
      const upstream = http.request({
        ...connection,
        method: req.method,
        path: req.url,
        headers: forwardRequestHeaders(req.headers, clientOf(req)),
      } as http.RequestOptions);
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
        if (retry && upstream.reusedSocket && !res.headersSent && !res.destroyed) return send(false);
        if (err instanceof DialError) return fail(res, err.kind, err.message);
        fail(res, "port_not_ready", err.message);
      });
      // The client went away: stop the upstream request too.
      res.on("close", () => {
        if (!res.writableFinished) upstream.destroy();
      });
      if (bodyless) upstream.end();
      else req.pipe(upstream);
    };
    if (bodyless) req.resume();
    send(retriable);
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
    const refuse = (status: number, code: string, retryAfter = false) => {
      answers.add("gateway", status);
      socket.end(
        `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: text/plain\r\n${GATEWAY_ERROR_HEADER}: ${code}\r\nconnection: close\r\n${retryAfter ? "retry-after: 10\r\n" : ""}\r\n${code}\r\n`,
      );
    };
    let text = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`;
    for (let i = 0; i < req.rawHeaders.length; i += 2) text += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
    const bytes = Buffer.concat([Buffer.from(`${text}\r\n`, "latin1"), head]); // header strings hold one byte per character
    // What the relay would not take (two Hosts, an unclear length, HTTP/1.0) it would hand back to this server: refused here instead.
    if (relayable(parseRequestHead(bytes, headEnd(bytes)), o.domain)?.label !== label) return refuse(400, "BAD_REQUEST");
    const r = await o.resolver.resolve(label);
    if (socket.destroyed) return; // the client went away while we looked
    if (r.kind !== "ok") {
      const page = failurePage(r.kind);
      return refuse(page.status, page.code, r.kind === "node_unreachable");
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
    handleRequest: (req: http.IncomingMessage, res: http.ServerResponse) =>
      handleRequest(req, res).catch((err) => {
        o.log.error("gateway request failed", { err });
        fail(res, "port_not_ready");
      }),
    handleUpgrade: (req: http.IncomingMessage, socket: Duplex, head: Buffer) => handleUpgrade(req, socket, head).catch(() => socket.destroy()),
    /** Closes what the gateway holds: the relay's client connections (the HTTP server does not know them) and pooled tunnels. */
    close() {
      router.close();
      for (const a of agents.values()) a.destroy();
      agents.clear();
    },
  };
}
export type Gateway = ReturnType<typeof createGateway>;
