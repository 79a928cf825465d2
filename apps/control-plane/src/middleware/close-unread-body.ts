import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../http/env";

/**
 * An answer given before the request's body was read (a 401 ahead of the
 * body, a route that takes none) leaves the body on the connection.
 * @hono/node-server drains it for only 500 ms and then drops the connection,
 * under a client that may already have sent its next request on it: so such
 * an answer says Connection: close, and the client opens a new one.
 */
export function closeUnreadBody(): MiddlewareHandler<AppEnv> {
  return async function closeUnreadBodyMiddleware(c, next) {
    await next();
    const length = c.req.header("content-length");
    const hasBody = c.req.header("transfer-encoding") !== undefined || (length !== undefined && length !== "0");
    if (hasBody && Object.keys(c.req.bodyCache).length === 0) c.res.headers.set("Connection", "close");
  };
}
