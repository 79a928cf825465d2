import type { Duplex } from "node:stream";

/**
 * Node's HTTP client and agent call socket methods (keep-alive, no-delay,
 * timeouts, ref/unref) on whatever a custom createConnection returns. A tunnel
 * stream is no TCP socket: give it harmless versions so it can stand in for one.
 * Idle timeouts are the tunnel's own business (see the dialer), so setTimeout
 * here only remembers nothing.
 */
export function asSocketLike<T extends Duplex>(s: T): T {
  const any = s as unknown as Record<string, unknown>;
  const self = () => s;
  for (const m of ["setKeepAlive", "setNoDelay", "setTimeout", "ref", "unref"]) if (typeof any[m] !== "function") any[m] = self;
  return s;
}
