// Endpoints must live on a registrable domain of their own. A browser lets a
// page set cookies for its registrable domain (example.com for
// abc.gpu.example.com), so a tenant's container serving
// abc.gpu.example.com could set cookies that the API or console at
// cloud.example.com receives (cookie tossing): the gateway strips Domain from
// the cookies containers send, but it cannot stop a page's own script. What a
// registrable domain is comes from the Public Suffix List (tldts), private
// section included, as browsers read it.
import { getDomain } from "tldts";

const registrable = (host: string): string | null => getDomain(host, { allowPrivateDomains: true });

/** "cloud.example.com:8443" and "[::1]:8080" without their port. */
function hostOf(authority: string): string {
  const trimmed = authority.trim().toLowerCase();
  if (trimmed.startsWith("[")) return trimmed.slice(1, trimmed.indexOf("]"));
  return trimmed.replace(/:\d+$/, "");
}

/**
 * The registrable domain the API (publicDomain, host[:port]) shares with the
 * endpoints under gatewayDomain, or undefined when they share none.
 */
export function sharedCookieScope(publicDomain: string, gatewayDomain: string): string | undefined {
  const api = registrable(hostOf(publicDomain));
  const endpoints = registrable(`endpoint.${gatewayDomain.trim().toLowerCase()}`);
  return api !== null && api === endpoints ? api : undefined;
}
