import type { MiddlewareHandler } from "hono";
import { randomUUID } from "node:crypto";
import type { AppEnv } from "../http/env";
import type { Logger } from "../services/logger";

/** Every response carries X-Request-Id; a caller's own id is kept when it looks sane. */
export function requestId(log: Logger): MiddlewareHandler<AppEnv> {
  return async function requestIdMiddleware(c, next) {
    const given = c.req.header("x-request-id");
    const id = given && /^[A-Za-z0-9._-]{1,64}$/.test(given) ? given : `req_${randomUUID()}`;
    c.set("requestId", id);
    c.set("log", log);
    c.header("X-Request-Id", id);
    await next();
  };
}
