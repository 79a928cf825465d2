import type { Duplex } from "node:stream";

/**
 * Node's HTTP client and agent call socket methods (keep-alive, no-delay,
 * timeouts, ref/unref) on whatever a custom createConnection returns. A tunnel
 * stream is no TCP socket: give it harmless versions so it can stand in for one.
 * Idle timeouts are the tunnel's own business (see the dialer), so setTimeout
 * here only remembers nothing.
 *
 * And close like a TCP socket does when the other side hangs up: ws's stream
 * only ends its readable side then and never emits 'close', so an idle
 * keep-alive tunnel the container had closed stayed in the HTTP agent's pool
 * and the next request on it failed with a 502.
 */
export function asSocketLike<T extends Duplex>(s: T): T {
  const any = s as unknown as Record<string, unknown>;
  const self = () => s;
  for (const m of ["setKeepAlive", "setNoDelay", "setTimeout", "ref", "unref"]) if (typeof any[m] !== "function") any[m] = self;
  s.once("end", () => s.destroy());
  return s;
}
