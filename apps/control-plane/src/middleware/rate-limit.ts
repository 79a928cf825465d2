import type { MiddlewareHandler } from "hono";
import { getConnInfo } from "@hono/node-server/conninfo";
import { ApiError } from "../errors";
import type { AppEnv } from "../http/env";
import type { Clock } from "../services/ids";

/**
 * A fixed window per client address, in memory. Enough to stop a script from
 * hammering sign-in on one replica; a shared limiter is the proxy's job.
 */
export function rateLimit(opts: { limit: number; windowMs: number; clock: Clock }): MiddlewareHandler<AppEnv> {
  const windows = new Map<string, { start: number; count: number }>();
  return async function rateLimitMiddleware(c, next) {
    let key = "unknown";
    try {
      key = getConnInfo(c).remote.address ?? "unknown";
    } catch {
      // app.request() in tests has no socket: all such calls share one bucket.
    }
    const now = opts.clock.now();
    let w = windows.get(key);
    if (!w || now - w.start >= opts.windowMs) {
      if (windows.size > 10_000) windows.clear();
      w = { start: now, count: 0 };
      windows.set(key, w);
    }
    w.count += 1;
    if (w.count > opts.limit) {
      const retryAfterS = Math.max(1, Math.ceil((w.start + opts.windowMs - now) / 1000));
      throw new ApiError("RATE_LIMITED", `too many requests; retry in ${retryAfterS} s`, { retryAfterSeconds: retryAfterS }, { "Retry-After": String(retryAfterS) });
    }
    await next();
  };
}
