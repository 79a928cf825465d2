import { randomUUID } from "node:crypto";
import { lazyChild } from "@cm/log";
import { OpenAPIHono } from "@hono/zod-openapi";
import { bodyLimit } from "hono/body-limit";
import { requestId } from "hono/request-id";
import type { Deps } from "./deps";
import { ApiError, errorResponse, onError } from "./errors";
import { parseTrustedProxies } from "./http/client-address";
import type { AppEnv } from "./http/env";
import { createRouteFactory } from "./http/route";
import { requireUser } from "./middleware/auth";
import { closeUnreadBody } from "./middleware/close-unread-body";
import { databaseGate, databaseUnavailable } from "./middleware/database-gate";
import { rateLimit } from "./middleware/rate-limit";
import { agentRoutes } from "./routes/agent";
import { authRoutes } from "./routes/auth";
import { consoleRoutes, defaultConsoleDir } from "./routes/console";
import { creditRoutes } from "./routes/credits";
import { deploymentRoutes } from "./routes/deployments";
import { docsRoutes } from "./routes/docs";
import { execRoutes } from "./routes/exec";
import { filesRoutes } from "./routes/files";
import { nodeRoutes } from "./routes/nodes";
import { operationsRoutes } from "./routes/operations";
import { operatorRoutes } from "./routes/operator";
import { operatorEarningsRoutes } from "./routes/operator-earnings";
import { operatorPayoutsRoutes } from "./routes/operator-payouts";
import { registryCredentialRoutes } from "./routes/registry-credentials";
import { tcpRoutes } from "./routes/tcp";
import { templateRoutes } from "./routes/templates";

export function createApp(deps: Deps) {
  const app = new OpenAPIHono<AppEnv>();

  // X-Request-Id on every response: a caller's own id is kept when it is short and plain, otherwise ours.
  app.use(requestId({ limitLength: 64, generator: () => `req_${randomUUID()}` }));
  // Every line a request logs carries its id.
  app.use(async function requestLogger(c, next) {
    c.set("log", lazyChild(deps.log, { requestId: c.get("requestId") }));
    await next();
  });
  app.use(closeUnreadBody());
  const limitBody = bodyLimit({
    maxSize: deps.config.MAX_BODY_BYTES,
    // The rest of the body is never read, so the connection cannot be reused.
    onError: () => {
      throw new ApiError("PAYLOAD_TOO_LARGE", `the body is larger than ${deps.config.MAX_BODY_BYTES} bytes`, undefined, { Connection: "close" });
    },
  });
  // A request with neither header has no body (RFC 9112, 6.3). hono's bodyLimit asks the request for its
  // body stream all the same, which makes @hono/node-server build a whole fetch Request (an AbortController,
  // undici's Request) for every GET: 15% of the catalogue's CPU under load (bench/README.md, catalogue).
  app.use(async function bodyLimitWhenBody(c, next) {
    if (c.req.header("content-length") === undefined && c.req.header("transfer-encoding") === undefined) return next();
    return limitBody(c, next);
  });
  // What an attacker would hammer: sign-in and refresh, per client address. Reading /auth/me is not limited.
  const signInLimit = rateLimit({
    limit: deps.config.AUTH_RATE_LIMIT_PER_MIN,
    windowMs: 60_000,
    clock: deps.clock,
    trustedProxies: parseTrustedProxies(deps.config.TRUSTED_PROXIES),
  });
  for (const path of ["/auth/nonce", "/auth/verify", "/auth/refresh"]) app.use(path, signInLimit);

  const route = createRouteFactory({ database: databaseGate({ health: deps.dbHealth }), user: requireUser(deps.auth) });
  app
    .route("/", operationsRoutes(deps, route))
    .route("/auth", authRoutes(deps, route))
    .route("/nodes", nodeRoutes(deps, route))
    .route("/operator/nodes", operatorRoutes(deps, route))
    .route("/operator/earnings", operatorEarningsRoutes(deps, route))
    .route("/operator/payouts", operatorPayoutsRoutes(deps, route))
    .route("/", agentRoutes(deps, route))
    .route("/templates", templateRoutes(deps, route))
    .route("/deployments", deploymentRoutes(deps, route))
    .route("/deployments", execRoutes(deps, route))
    .route("/deployments", tcpRoutes(deps, route))
    .route("/deployments", filesRoutes(deps, route))
    .route("/credits", creditRoutes(deps, route))
    .route("/registry-credentials", registryCredentialRoutes(deps, route));

  app.route("/", docsRoutes(app));
  // The web console, on the API's host only (server.ts gives endpoint hosts to the gateway before this app).
  app.route(
    "/",
    consoleRoutes({ dir: deps.config.CONSOLE_DIR || defaultConsoleDir(), rpcUrl: deps.config.SOLANA_RPC_URL, stableDecimals: deps.config.STABLE_DECIMALS }),
  );

  app.notFound((c) => errorResponse(c, new ApiError("NOT_FOUND", `no route for ${c.req.method} ${new URL(c.req.url).pathname}`)));
  app.onError((err, c) => onError(err, c, (e) => (deps.dbHealth.noteError(e) ? databaseUnavailable() : undefined)));
  return { app };
}
