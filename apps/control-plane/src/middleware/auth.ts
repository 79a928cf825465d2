import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../http/env";
import type { AuthService, RouteScope } from "../services/auth-service";

/** For a route that needs `scope`: sets `user` and `grant` from the bearer token or API key, or fails 401 (403 for a key without the scope). */
export function requireUser(auth: AuthService) {
  return (scope: RouteScope): MiddlewareHandler<AppEnv> =>
    async function requireUserMiddleware(c, next) {
      const { user, grant } = await auth.authenticate(c.req.header("authorization"), scope);
      c.set("user", user);
      c.set("grant", grant);
      await next();
    };
}
