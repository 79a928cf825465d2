import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../http/env";
import type { AuthService } from "../services/auth-service";

export function requireUser(auth: AuthService): MiddlewareHandler<AppEnv> {
  return async function requireUserMiddleware(c, next) {
    const { user, grant } = await auth.authenticate(c.req.header("authorization"));
    c.set("user", user);
    c.set("grant", grant);
    await next();
  };
}
