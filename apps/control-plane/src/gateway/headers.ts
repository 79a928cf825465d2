import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

/** RFC 9110 §7.6.1: meaningful for one connection only, never forwarded. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/** The headers a message's Connection header names (RFC 9110 §7.6.1), lowercased. */
function connectionNames(headers: IncomingHttpHeaders): string[] {
  return String(headers.connection ?? "")
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
}

function hopHeaders(headers: IncomingHttpHeaders): Set<string> {
  return new Set([...HOP_BY_HOP, ...connectionNames(headers)]);
}

/**
 * The request headers sent on to the container: hop-by-hop ones dropped (those
 * the Connection header names too), and the client's address, scheme and host
 * appended to any X-Forwarded-* a proxy in front already set.
 */
export function forwardRequestHeaders(h: IncomingHttpHeaders, client: { ip: string; proto: "http" | "https"; host: string }): OutgoingHttpHeaders {
  const drop = hopHeaders(h);
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined || drop.has(k)) continue;
    out[k] = v;
  }
  const prior = h["x-forwarded-for"];
  out["x-forwarded-for"] = prior ? `${Array.isArray(prior) ? prior.join(", ") : prior}, ${client.ip}` : client.ip;
  out["x-forwarded-proto"] = typeof h["x-forwarded-proto"] === "string" ? h["x-forwarded-proto"] : client.proto;
  out["x-forwarded-host"] = typeof h["x-forwarded-host"] === "string" ? h["x-forwarded-host"] : client.host;
  return out;
}

/**
 * A Set-Cookie value with its Domain attributes removed, so the cookie stays on
 * the endpoint host that set it. With `Domain=<gateway domain>` (or a parent) a
 * container could plant cookies for every other tenant's endpoint and for the
 * API next to them: cookie tossing. Nothing else of the cookie changes.
 */
export function hostOnlyCookie(value: string): string {
  const [pair = "", ...attributes] = value.split(";");
  const kept = attributes.filter((attribute) => attribute.split("=", 1)[0]!.trim().toLowerCase() !== "domain");
  return kept.length === attributes.length ? value : [pair, ...kept].join(";");
}

/**
 * The one rule for each header of a container's response, whichever path
 * carries it to the client (the byte relay, for upgrades too, or Node's HTTP
 * client): the value sent on, or undefined to drop it. Hop-by-hop headers and
 * those the response's Connection names go; cookies are kept to their host.
 * `framedAsIs`: the body goes on in the bytes it came in, so the headers that
 * frame it stay.
 */
export function forwardedResponseField(lowerName: string, value: string, connection: readonly string[], framedAsIs: boolean): string | undefined {
  if (framedAsIs && (lowerName === "transfer-encoding" || lowerName === "content-length")) return value;
  if (HOP_BY_HOP.has(lowerName) || connection.includes(lowerName)) return undefined;
  return lowerName === "set-cookie" ? hostOnlyCookie(value) : value;
}

/** The response headers Node's HTTP client read, as sent back through Node's HTTP server (which frames the body anew). */
export function forwardResponseHeaders(h: IncomingHttpHeaders): OutgoingHttpHeaders {
  const connection = connectionNames(h);
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined) continue;
    const kept = (Array.isArray(v) ? v : [v]).flatMap((one) => forwardedResponseField(k, one, connection, false) ?? []);
    if (kept.length > 0) out[k] = Array.isArray(v) ? kept : kept[0];
  }
  return out;
}

/**
 * The endpoint label of a Host header under the gateway domain, or undefined.
 * `abc123-8888.gpu.example.com:443` under `gpu.example.com` is `abc123-8888`.
 */
export function endpointLabel(host: string | undefined, gatewayDomain: string): string | undefined {
  if (!host) return undefined;
  const name = host.replace(/:\d+$/, "").toLowerCase();
  const suffix = "." + gatewayDomain.toLowerCase();
  if (!name.endsWith(suffix)) return undefined;
  const label = name.slice(0, -suffix.length);
  return /^[a-z0-9][a-z0-9-]{0,62}$/.test(label) ? label : undefined;
}
