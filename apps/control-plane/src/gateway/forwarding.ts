// How the gateway forwards an endpoint request, whichever front end parsed it:
// the byte relay (relay.ts, for connections it holds from their first request)
// and Node's HTTP server (proxy.ts, for a connection that began with an API
// request, an HTTP/1.0 client, or a head the relay leaves to Node's strict
// parser). Both open tunnels, send again and answer failures through the
// functions here, and nothing else: only how they read HTTP differs. (Node's
// server cannot hand a connection to the relay between requests: its parser
// reads the socket's handle itself and may already hold part of a body or a
// pipelined request. An upgrade is where it lets go cleanly, and there the
// relay does take over: proxy.ts's handleUpgrade.) The replica hop is a
// TunnelDialer (agents/replica-hop.ts), so both front ends reach a container
// whose agent another replica holds the same way.
import type { Duplex } from "node:stream";
import { GATEWAY_ERROR_HEADER } from "@cm/protocol";
import { failurePage, type GatewayFailure } from "./pages";
import { DialError, type EndpointResolver, type EndpointTarget, RETRIABLE_METHODS, type TunnelDialer } from "./ports";

/** The endpoint is not there to dial (unknown, stopped, its node away). */
export class Refused extends Error {
  constructor(readonly kind: GatewayFailure) {
    super(kind);
  }
}

/**
 * Opens a tunnel to what `label` points at now. A client connection keeps one
 * tunnel at a time; each new one (after the container closed the last, or for
 * a request sent again) looks the endpoint up afresh, so a connection kept
 * alive across a stop gets the stopped page, never an old target. `known` is
 * a lookup made a moment ago for the same request, which need not be repeated.
 * Fails with Refused or DialError (failureOf reads either).
 */
export async function openTunnel(o: { resolver: EndpointResolver; dialer: TunnelDialer }, label: string, known?: EndpointTarget): Promise<Duplex> {
  let target = known;
  if (!target) {
    const r = await o.resolver.resolve(label);
    if (r.kind !== "ok") throw new Refused(r.kind);
    target = r.target;
  }
  return o.dialer.dial(target);
}

/** What to tell the visitor when a tunnel could not be opened or failed before its answer began. */
export function failureOf(err: unknown): { kind: GatewayFailure; detail?: string } {
  if (err instanceof Refused) return { kind: err.kind };
  if (err instanceof DialError) return { kind: err.kind, detail: err.message };
  return { kind: "port_not_ready", detail: err instanceof Error ? err.message : String(err) };
}

/**
 * The one retry: a container may close an idle kept-alive connection just as
 * the gateway reuses it (the close takes a moment to cross the tunnel). As
 * Node's docs advise, such a request is sent again, once, on a new tunnel,
 * when sending it twice cannot matter: no body, a method without side effects,
 * on a tunnel that had already served a response (a new one that closes
 * unanswered is the container's answer), with nothing else sent on it that
 * would be lost, and before any byte of its answer came.
 */
export function mayResend(r: { method: string; bodyless: boolean; reusedTunnel: boolean; aloneOnTunnel: boolean; firstTry: boolean }) {
  return r.firstTry && r.bodyless && RETRIABLE_METHODS.has(r.method) && r.reusedTunnel && r.aloneOnTunnel;
}

/** The gateway's own answer (a page saying why), as a status and header lines. */
export function failureResponse(kind: GatewayFailure, detail?: string) {
  const page = failurePage(kind, detail);
  const headers: Array<[string, string]> = [
    ["content-type", "text/html; charset=utf-8"],
    ["cache-control", "no-store"],
    [GATEWAY_ERROR_HEADER, page.code],
  ];
  if (kind === "node_unreachable") headers.push(["retry-after", "10"]);
  return { status: page.status, reason: kind.replace(/_/g, " "), headers, html: page.html };
}

/** The same answer as bytes for a connection the gateway writes itself (the relay, a refused upgrade); the connection closes after it. */
export function failureBytes(kind: GatewayFailure, detail?: string) {
  const f = failureResponse(kind, detail);
  const lines = [`HTTP/1.1 ${f.status} ${f.reason}`, ...f.headers.map(([k, v]) => `${k}: ${v}`)];
  lines.push(`content-length: ${Buffer.byteLength(f.html)}`, "connection: close");
  return { status: f.status, bytes: `${lines.join("\r\n")}\r\n\r\n${f.html}` };
}
