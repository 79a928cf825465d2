import { z } from "zod";
import type { Deps } from "../deps";
import { metricsRoutes } from "../http/metrics";
import { createRouter, json, type RouteFactory } from "../http/route";
import { databaseUnavailable } from "../middleware/database-gate";

/** Liveness and readiness: what an orchestrator and a load balancer poll. */
export function operationsRoutes(deps: Deps, route: RouteFactory) {
  const tags = ["operations"];
  return createRouter()
    .openapi(
      route(
        {
          method: "get",
          path: "/health",
          operationId: "getHealth",
          tags,
          summary: "Liveness",
          description: "200 while the process serves, whatever the database does: restart the process only when this fails.",
          responses: { 200: json(z.object({ status: z.literal("ok") }), "The process serves") },
        },
        { database: false },
      ),
      (c) => c.json({ status: "ok" as const }, 200),
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/ready",
          operationId: "getReadiness",
          tags,
          summary: "Readiness",
          description: "200 when the database answers, 503 (with Retry-After) when it does not: what a load balancer should route on.",
          responses: { 200: json(z.object({ status: z.literal("ready") }), "The database answers") },
        },
        { database: false, errors: ["SERVICE_UNAVAILABLE"] },
      ),
      async (c) => {
        if (!(await deps.dbHealth.check())) throw databaseUnavailable();
        return c.json({ status: "ready" as const }, 200);
      },
    )
    .route("/", metricsRoutes(deps));
}
