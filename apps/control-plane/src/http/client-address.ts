// Which address a request comes from, for the rate limiter. Behind a reverse
// proxy every request's socket is the proxy's, so one client could lock out
// everyone; X-Forwarded-For says who the proxy served, but only a proxy we
// trust may say it: from anyone else the header is a lie waiting to be told.
import { BlockList, isIP } from "node:net";

export interface TrustedProxies {
  /** true when `address` is one of the configured proxies */
  has(address: string): boolean;
  readonly empty: boolean;
}

/** "::ffff:10.0.0.1" is how an IPv4 peer looks on a dual-stack socket. */
function plain(address: string): string {
  const trimmed = address.trim();
  return trimmed.startsWith("::ffff:") && isIP(trimmed.slice(7)) === 4 ? trimmed.slice(7) : trimmed;
}

/**
 * Parses TRUSTED_PROXIES: addresses or CIDRs, comma-separated ("127.0.0.1,
 * 10.0.0.0/8, ::1"). Throws on an entry that is neither, naming it.
 */
export function parseTrustedProxies(list: string): TrustedProxies {
  const blocks = new BlockList();
  let count = 0;
  for (const entry of list
    .split(",")
    .map((e) => e.trim())
    .filter(Boolean)) {
    const [address = "", prefix] = entry.split("/");
    const family = isIP(address);
    const bits = prefix === undefined ? undefined : Number(prefix);
    if (family === 0 || (bits !== undefined && !(Number.isInteger(bits) && bits >= 0 && bits <= (family === 4 ? 32 : 128)))) {
      throw new Error(`"${entry}" is not an IP address or a CIDR range`);
    }
    const type = family === 4 ? "ipv4" : "ipv6";
    if (bits === undefined) blocks.addAddress(address, type);
    else blocks.addSubnet(address, bits, type);
    count++;
  }
  return {
    empty: count === 0,
    has(address) {
      const a = plain(address);
      const family = isIP(a);
      return family !== 0 && blocks.check(a, family === 4 ? "ipv4" : "ipv6");
    },
  };
}

/**
 * The client's address: the socket's peer, unless the peer is a trusted proxy;
 * then the nearest address in X-Forwarded-For that is not itself a trusted
 * proxy (read right to left: each proxy appends the address it was reached
 * from, and only the entries our proxies appended can be believed).
 */
export function clientAddress(peer: string | undefined, forwardedFor: string | undefined, trusted: TrustedProxies): string {
  const socketPeer = plain(peer ?? "");
  if (!socketPeer) return "unknown";
  if (trusted.empty || !trusted.has(socketPeer) || !forwardedFor) return socketPeer;
  const hops = forwardedFor
    .split(",")
    .map(plain)
    .filter((hop) => isIP(hop) !== 0);
  for (let i = hops.length - 1; i >= 0; i--) if (!trusted.has(hops[i]!)) return hops[i]!;
  return hops[0] ?? socketPeer;
}
