import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../http/env";
import type { AuthService } from "../services/auth-service";

export function requireUser(auth: AuthService): MiddlewareHandler<AppEnv> {
  return async function requireUserMiddleware(c, next) {
    c.set("user", await auth.authenticate(c.req.header("authorization")));
    await next();
  };
}
