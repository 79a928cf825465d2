import { getConnInfo } from "@hono/node-server/conninfo";
import type { MiddlewareHandler } from "hono";
import { ApiError } from "../errors";
import { clientAddress, type TrustedProxies } from "../http/client-address";
import type { AppEnv } from "../http/env";
import type { Clock } from "../services/ids";

/** Windows kept at most; past it the oldest go, so a flood of keys cannot reset everyone's. */
const DEFAULT_MAX_KEYS = 10_000;

export interface FixedWindows {
  /** Counts one request for `key`; throws RATE_LIMITED (429, Retry-After) past the limit. */
  hit(key: string): void;
}

/** A fixed window of `limit` requests per `windowMs` for each key, in memory, on this replica. */
export function fixedWindows(opts: { limit: number; windowMs: number; clock: Pick<Clock, "now">; maxKeys?: number }): FixedWindows {
  const maxKeys = opts.maxKeys ?? DEFAULT_MAX_KEYS;
  // Insertion order is window-start order: a key is re-inserted when its window restarts.
  const windows = new Map<string, { start: number; count: number }>();
  return {
    hit(key) {
      const now = opts.clock.now();
      let w = windows.get(key);
      if (!w || now - w.start >= opts.windowMs) {
        windows.delete(key);
        while (windows.size >= maxKeys) windows.delete(windows.keys().next().value!);
        w = { start: now, count: 0 };
        windows.set(key, w);
      }
      w.count += 1;
      if (w.count > opts.limit) {
        const retryAfterS = Math.max(1, Math.ceil((w.start + opts.windowMs - now) / 1000));
        throw new ApiError(
          "RATE_LIMITED",
          `too many requests; retry in ${retryAfterS} s`,
          { retryAfterSeconds: retryAfterS },
          { "Retry-After": String(retryAfterS) },
        );
      }
    },
  };
}

/**
 * Fixed windows per client address. Enough to stop a script from hammering
 * sign-in on one replica; a shared limiter is the proxy's job. The address is
 * the one `trustedProxies` vouch for (see client-address.ts).
 */
export function rateLimit(opts: {
  limit: number;
  windowMs: number;
  clock: Pick<Clock, "now">;
  trustedProxies: TrustedProxies;
  maxClients?: number;
}): MiddlewareHandler<AppEnv> {
  const windows = fixedWindows({ limit: opts.limit, windowMs: opts.windowMs, clock: opts.clock, ...(opts.maxClients ? { maxKeys: opts.maxClients } : {}) });
  return async function rateLimitMiddleware(c, next) {
    let peer: string | undefined;
    try {
      peer = getConnInfo(c).remote.address;
    } catch {
      // app.request() in tests has no socket: all such calls share one bucket.
    }
    windows.hit(clientAddress(peer, c.req.header("x-forwarded-for"), opts.trustedProxies));
    await next();
  };
}
