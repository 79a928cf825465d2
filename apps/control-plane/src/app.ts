import { Hono } from "hono";
import { z } from "zod";
import { bodyLimit } from "hono/body-limit";
import type { Deps } from "./deps";
import { ApiError, errorResponse, onError } from "./errors";
import { createApiRouter } from "./http/api-router";
import type { AppEnv } from "./http/env";
import { createOpenApiRegistry } from "./http/openapi";
import { requireUser } from "./middleware/auth";
import { databaseGate, databaseUnavailable } from "./middleware/database-gate";
import { parseTrustedProxies } from "./http/client-address";
import { rateLimit } from "./middleware/rate-limit";
import { requestId } from "./middleware/request-id";
import { authRoutes } from "./routes/auth";
import { creditRoutes } from "./routes/credits";
import { deploymentRoutes } from "./routes/deployments";
import { docsRoutes } from "./routes/docs";
import { nodeRoutes } from "./routes/nodes";
import { templateRoutes } from "./routes/templates";

export function createApp(deps: Deps) {
  const app = new Hono<AppEnv>();
  const registry = createOpenApiRegistry({
    title: "Compute marketplace API",
    version: "1.0.0",
    description: "Rent GPU nodes and run containers on them. Credits: 1 credit = 1 US cent. Errors share one shape: { error: { code, message, requestId, details? } }.",
  });

  app.use("*", requestId(deps.log));
  app.use(
    "*",
    bodyLimit({
      maxSize: deps.config.MAX_BODY_BYTES,
      // The rest of the body is never read, so the connection cannot be reused.
      onError: () => {
        throw new ApiError("PAYLOAD_TOO_LARGE", `the body is larger than ${deps.config.MAX_BODY_BYTES} bytes`, undefined, { Connection: "close" });
      },
    }),
  );
  // What an attacker would hammer: sign-in and refresh, per client address. Reading /auth/me is not limited.
  const signInLimit = rateLimit({ limit: deps.config.AUTH_RATE_LIMIT_PER_MIN, windowMs: 60_000, clock: deps.clock, trustedProxies: parseTrustedProxies(deps.config.TRUSTED_PROXIES) });
  for (const path of ["/auth/nonce", "/auth/verify", "/auth/refresh"]) app.use(path, signInLimit);

  const api = createApiRouter(app, registry, requireUser(deps.auth), databaseGate({ health: deps.dbHealth }));
  api.get(
    "/health",
    { tag: "operations", summary: "Liveness", description: "200 while the process serves, whatever the database does: restart the process only when this fails.", database: false, response: z.object({ status: z.literal("ok") }) },
    async (c) => c.json({ status: "ok" as const }),
  );
  api.get(
    "/ready",
    {
      tag: "operations", summary: "Readiness", database: false, errors: ["SERVICE_UNAVAILABLE"],
      description: "200 when the database answers, 503 (with Retry-After) when it does not: what a load balancer should route on.",
      response: z.object({ status: z.literal("ready") }),
    },
    async (c) => {
      if (!(await deps.dbHealth.check())) throw databaseUnavailable();
      return c.json({ status: "ready" as const });
    },
  );

  authRoutes(api, deps);
  nodeRoutes(api, deps);
  templateRoutes(api, deps);
  deploymentRoutes(api, deps);
  creditRoutes(api, deps);
  docsRoutes(app, registry);

  app.notFound((c) => errorResponse(c, new ApiError("NOT_FOUND", `no route for ${c.req.method} ${new URL(c.req.url).pathname}`)));
  app.onError((err, c) => onError(err, c, (e) => (deps.dbHealth.noteError(e) ? databaseUnavailable() : undefined)));
  return { app, registry };
}
