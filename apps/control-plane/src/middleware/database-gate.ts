import type { MiddlewareHandler } from "hono";
import { ApiError } from "../errors";
import type { AppEnv } from "../http/env";
import { DATABASE_RETRY_AFTER_S, type DatabaseHealth } from "../services/database-health";

/** The answer while the database is down: 503, the one error shape, and when to try again. */
export function databaseUnavailable(): ApiError {
  return new ApiError("SERVICE_UNAVAILABLE", `the database is not answering; retry in ${DATABASE_RETRY_AFTER_S} s`, undefined, {
    "Retry-After": String(DATABASE_RETRY_AFTER_S),
  });
}

/**
 * Fails a request that needs the database at once while the database is known
 * to be down, instead of letting it wait on a query that cannot be answered.
 */
export function databaseGate(opts: { health: DatabaseHealth }): MiddlewareHandler<AppEnv> {
  return async function databaseGateMiddleware(_c, next) {
    if (!opts.health.up) throw databaseUnavailable();
    await next();
  };
}
