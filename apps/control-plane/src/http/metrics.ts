// What one replica exposes to Prometheus: enough to see where its load and its
// agents are, and whether the replicas' wake-ups flow. Served at GET /metrics,
// outside the API document (it is for the operator's scraper, not for tenants),
// and not public: with METRICS_TOKEN set, only a request bearing it is answered;
// without, only one from this machine (the loopback) that no proxy forwarded, so
// a scraper on the host works with nothing to configure. Behind a reverse proxy
// every request comes from the loopback, but carries the proxy's forwarding
// headers (X-Forwarded-For, Forwarded, X-Real-IP: the nginx example sets the
// first): such a request is refused unless it bears the token.
import { timingSafeEqual } from "node:crypto";
import { getConnInfo } from "@hono/node-server/conninfo";
import { Counter, collectDefaultMetrics, Gauge, Registry } from "prom-client";
import type { Deps } from "../deps";
import { ApiError } from "../errors";
import { createRouter } from "./route";

const LOOPBACK = /^(127\.|::1$|::ffff:127\.)/;

/** Pure: whether a request may read the metrics. */
export function metricsAllowed(token: string | undefined, authorization: string | undefined, peer: string | undefined, forwarded = false): boolean {
  if (!token) return !forwarded && peer !== undefined && LOOPBACK.test(peer);
  const given = Buffer.from(authorization?.replace(/^Bearer\s+/i, "") ?? "");
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

/** A counter whose value is read from elsewhere at each scrape. */
function countedFrom(registry: Registry, name: string, help: string, read: () => number) {
  return new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

export function createMetricsRegistry(
  deps: Pick<Deps, "agents" | "replicas" | "streams" | "config" | "endpoints" | "periodic" | "commandWakes" | "watch" | "poolUse">,
): Registry {
  const registry = new Registry();
  // The process's CPU, memory, event-loop lag and handles, as cm_process_* and cm_nodejs_*.
  collectDefaultMetrics({ register: registry, prefix: "cm_" });
  new Gauge({
    name: "cm_agent_sessions",
    help: "Agents whose sessions this replica holds",
    registers: [registry],
    collect() {
      this.set(deps.agents.sessionsHeld());
    },
  });
  new Gauge({
    name: "cm_stream_followers",
    help: "Logs and events streams open on this replica",
    registers: [registry],
    collect() {
      this.set(deps.streams.openCount());
    },
  });
  countedFrom(
    registry,
    "cm_stream_fallback_reads_total",
    "The streams' fallback reads of the store: one a period for all the deployments followed here",
    () => deps.watch.fallbackReads,
  );
  new Counter({
    name: "cm_gateway_requests_total",
    help: "Endpoint requests the gateway answered, by status class and by who answered (the container, or the gateway's own page)",
    labelNames: ["status", "source"],
    registers: [registry],
    collect() {
      this.reset();
      for (const { source, status, count } of deps.endpoints.answers.entries()) this.inc({ source, status }, count);
    },
  });
  registry.registerMetric(deps.commandWakes.histogram);
  new Gauge({
    name: "cm_periodic_work_running",
    help: "Periodic work this replica runs (1) or not (0), by job",
    labelNames: ["job"],
    registers: [registry],
    collect() {
      for (const { job, running } of deps.periodic.entries()) this.set({ job }, running ? 1 : 0);
    },
  });
  new Counter({
    name: "cm_periodic_work_turns_total",
    help: "Turns of each periodic job this replica took",
    labelNames: ["job"],
    registers: [registry],
    collect() {
      this.reset();
      for (const { job, turns } of deps.periodic.entries()) this.inc({ job }, turns);
    },
  });
  const pool = deps.poolUse;
  new Gauge({
    name: "cm_db_pool_max",
    help: "Database connections this process may hold (1 on the embedded database)",
    registers: [registry],
    collect() {
      this.set(pool.max);
    },
  });
  new Gauge({
    name: "cm_db_calls_in_flight",
    help: "Database runs and transactions under way: above cm_db_pool_max, calls wait for a connection",
    registers: [registry],
    collect() {
      this.set(pool.inFlight());
    },
  });
  countedFrom(
    registry,
    "cm_commands_swept_total",
    "Changes the command sweep told agents of because their wake-up did not come",
    () => deps.agents.sweep.caught,
  );
  const bus = deps.replicas;
  if (bus) {
    countedFrom(registry, "cm_replica_notices_sent_total", "Wake-ups this replica sent to the others (LISTEN/NOTIFY)", () => bus.counts.sent);
    countedFrom(registry, "cm_replica_notices_received_total", "Wake-ups this replica received from the others", () => bus.counts.received);
    countedFrom(
      registry,
      "cm_replica_notices_failed_total",
      "Wake-ups that could not be sent (the others catch up by their periodic reads)",
      () => bus.counts.failed,
    );
  }
  return registry;
}

export function metricsRoutes(deps: Deps) {
  const registry = createMetricsRegistry(deps);
  return createRouter().get("/metrics", async (c) => {
    let peer: string | undefined;
    try {
      peer = getConnInfo(c).remote.address;
    } catch {
      peer = undefined;
    }
    const forwarded = ["x-forwarded-for", "forwarded", "x-real-ip"].some((h) => c.req.header(h) !== undefined);
    if (!metricsAllowed(deps.config.METRICS_TOKEN, c.req.header("authorization"), peer, forwarded))
      throw new ApiError("NOT_FOUND", "no such route: /metrics is served to this machine, or to a scraper with METRICS_TOKEN");
    return c.body(await registry.metrics(), 200, { "content-type": registry.contentType });
  });
}
