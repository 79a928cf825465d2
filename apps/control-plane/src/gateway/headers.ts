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

function hopHeaders(headers: IncomingHttpHeaders): Set<string> {
  const named = String(headers.connection ?? "")
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  return new Set([...HOP_BY_HOP, ...named]);
}

/**
 * The request headers sent on to the container: hop-by-hop ones dropped (those
 * the Connection header names too), and the client's address, scheme and host
 * appended to any X-Forwarded-* a proxy in front already set.
 */
export function forwardRequestHeaders(
  h: IncomingHttpHeaders,
  client: { ip: string; proto: "http" | "https"; host: string },
  keepUpgrade = false,
): OutgoingHttpHeaders {
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
  if (keepUpgrade) {
    out.connection = "Upgrade";
    if (h.upgrade) out.upgrade = h.upgrade;
  }
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

/** The response headers sent back to the client: hop-by-hop ones dropped, cookies kept to their host. */
export function forwardResponseHeaders(h: IncomingHttpHeaders): OutgoingHttpHeaders {
  const drop = hopHeaders(h);
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined && !drop.has(k)) out[k] = v;
  if (h["set-cookie"]) out["set-cookie"] = h["set-cookie"].map(hostOnlyCookie);
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
