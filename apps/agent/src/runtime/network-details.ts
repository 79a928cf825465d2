// Docker's messages carry the node's network details: "lookup ghcr.io on
// 10.0.0.2:53: no such host" names the node's DNS resolver, a proxy error its
// proxy's address. Reasons a tenant reads must not. Pure.

const HIDDEN = "(address hidden)";
/** "lookup <host> on <resolver>": the resolver is the node's; the failed lookup says enough. */
const RESOLVER = /(lookup \S+) on (?:\[[0-9a-fA-F:.%]+\](?::\d+)?|[0-9a-fA-F:.]+)(?=:)/g;
const ADDRESSES = [
  /\[[0-9a-fA-F:.%]+\](?::\d+)?/g, // [v6]:port, as Go writes it
  /(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?(?![\w.])/g, // v4[:port]
  // A bare v6: "::" or at least five colons, so "12:30:45" and "app:1.2.3" stay
  /(?<![\w:])(?=[0-9a-fA-F:]*::|(?:[0-9a-fA-F]{1,4}:){5})[0-9a-fA-F]{0,4}(?::[0-9a-fA-F]{0,4}){2,7}(?![\w:])/g,
];

/**
 * The message without resolver and IP addresses. An address that appears in
 * `keep` (what the tenant wrote, e.g. an image on a registry given by address)
 * stays: it tells the tenant nothing new.
 */
export function hideNetworkDetails(message: string, keep: readonly string[] = []): string {
  let out = message.replace(RESOLVER, "$1");
  for (const pattern of ADDRESSES) {
    out = out.replace(pattern, (address) => (keep.some((text) => text.includes(address)) ? address : HIDDEN));
  }
  return out;
}

/** What of a registry's error a tenant reads: enough to act on, not a page of whatever answered. */
const PULL_REASON_MAX = 300;
/** Docker quotes a body it could not read as a registry's error: `...response body: <why>: "<the body>"`. */
const QUOTED_BODY = /(response body)(?::[^"]*)?: "(?:[^"\\]|\\.)*"?/gi;

/**
 * A failed pull's reason without the body of what answered (a registry's page,
 * or a service on the node the image named), cut to a few lines on whole
 * characters. Pure.
 */
export function shortPullReason(message: string): string {
  const out = message.replace(QUOTED_BODY, "$1 not shown");
  const chars = Array.from(out);
  return chars.length <= PULL_REASON_MAX ? out : `${chars.slice(0, PULL_REASON_MAX - 1).join("")}…`;
}
