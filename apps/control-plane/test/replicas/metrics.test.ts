import http from "node:http";
import { needs, sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createMetricsRegistry, metricsAllowed } from "../../src/http/metrics";
import type { AgentHarness } from "../agents/support/agent-harness";
import { startHarness } from "../support/harness";
import { type ReplicaPair, startReplicaPair } from "./support/pair";

/** A metric's value in Prometheus' text format, or undefined; with labels, the series that has each of them, whatever their order. */
const metricValue = (text: string, name: string, labels: Record<string, string> = {}) => {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text
    .split("\n")
    .find((l) => (wanted.length === 0 ? l.startsWith(`${name} `) : l.startsWith(`${name}{`) && wanted.every((w) => l.slice(0, l.indexOf("}")).includes(w))));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
};

/** A request to one of the gateway's endpoint hosts on this replica; its status. */
const endpointRequest = (url: string, host: string) =>
  new Promise<number>((resolve, reject) => {
    const req = http.get(url, { headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", reject);
  });

/** Polls `read` until it gives a value (the stream's close takes a turn to reach the server). */
async function until<T>(read: () => Promise<T | undefined>, ms = 5_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await read();
    if (v !== undefined) return v;
    if (Date.now() - t0 > ms) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 50));
  }
}

needs("postgres").describe("each replica's /metrics", () => {
  let a: AgentHarness;
  let b: AgentHarness;
  let pair: ReplicaPair;
  beforeAll(async () => {
    pair = await startReplicaPair({ b: { METRICS_TOKEN: "a-scraper-token-of-some-length" } });
    ({ a, b } = pair);
  });
  afterAll(() => pair?.close());

  it("says which replica holds the agents and that wake-ups flow between them; only to this machine or the token", async () => {
    const op = await a.signIn();
    const node = await a.connectedNode(op.token);
    const tenant = await b.signIn();
    await b.grantCredits(tenant.user.id, 1000);
    await b.call("POST", "/deployments", { token: tenant.token, body: { nodeId: node.id, customImage: "busybox:1.36" } });
    await node.agent.next("command", (c) => c.action === "create", 3000);

    // A serves its metrics to the loopback, the test's own address.
    const ra = await fetch(`${a.url}/metrics`);
    expect(ra.status).toBe(200);
    expect(ra.headers.get("content-type")).toMatch(/^text\/plain/);
    const ta = await ra.text();
    // What a reverse proxy on this machine forwards is not this machine's scraper.
    expect((await fetch(`${a.url}/metrics`, { headers: { "x-forwarded-for": "203.0.113.9" } })).status).toBe(404);
    expect(metricValue(ta, "cm_agent_sessions")).toBe(1);
    expect(metricValue(ta, "cm_replica_notices_received_total")).toBeGreaterThan(0);
    expect(metricValue(ta, "cm_process_resident_memory_bytes")).toBeGreaterThan(0);

    // B has a token: without it, even from the loopback, there is no such route.
    const refused = await fetch(`${b.url}/metrics`);
    expect(refused.status).toBe(404);
    expect((await refused.json()).error.code).toBe("NOT_FOUND");
    const tb = await (await fetch(`${b.url}/metrics`, { headers: { authorization: "Bearer a-scraper-token-of-some-length" } })).text();
    expect(metricValue(tb, "cm_agent_sessions")).toBe(0);
    expect(metricValue(tb, "cm_replica_notices_sent_total")).toBeGreaterThan(0);
    await node.agent.close();
  });

  it("counts the gateway's answers, the commands' wake-up, stream followers, periodic work and the database pool", async () => {
    const scrape = async () => (await fetch(`${a.url}/metrics`)).text();
    const before = await scrape();
    // The replicas here start with their periodic work stopped (the tests drive it): none runs, so each says 0.
    expect(metricValue(before, "cm_periodic_work_running", { job: "offline-monitor" })).toBe(0);
    expect(metricValue(before, "cm_periodic_work_running", { job: "metering" })).toBe(0);
    a.deps.agents.start();
    a.deps.metering.start();
    expect(metricValue(before, "cm_db_pool_max")).toBe(10);
    expect(metricValue(before, "cm_db_calls_in_flight")).toBeGreaterThanOrEqual(0);

    // A visitor at an endpoint no deployment has: the gateway's own 404, on the replica it reached.
    const gatewayNotFound = { status: "4xx", source: "gateway" };
    const notFoundBefore = metricValue(before, "cm_gateway_requests_total", gatewayNotFound) ?? 0;
    expect(await endpointRequest(a.url, "nosuchendpointkey-8080.localhost")).toBe(404);

    // A command issued on B reaches the agent whose session A holds: A records how long that took.
    const op = await a.signIn();
    const node = await a.connectedNode(op.token);
    const tenant = await b.signIn();
    await b.grantCredits(tenant.user.id, 1000);
    const created = await b.call("POST", "/deployments", { token: tenant.token, body: { nodeId: node.id, customImage: "busybox:1.36" } });
    await node.agent.next("command", (c) => c.action === "create", 3000);

    // A stream open on A: a follower, and its fallback reads turning.
    const stream = await fetch(`${a.url}/deployments/${created.json.deployment.id}/logs/stream`, { headers: { authorization: `Bearer ${tenant.token}` } });
    expect(stream.status).toBe(200);
    await new Promise((r) => setTimeout(r, 1_200));
    const during = await scrape();
    expect(metricValue(during, "cm_gateway_requests_total", gatewayNotFound)).toBe(notFoundBefore + 1);
    expect(metricValue(during, "cm_command_wake_seconds_count")).toBeGreaterThanOrEqual(1);
    // The create went out well within the wake-up's goal (100 ms added over one replica): at most the 250 ms bucket.
    expect(metricValue(during, "cm_command_wake_seconds_bucket", { le: "0.25" })).toBeGreaterThanOrEqual(1);
    expect(metricValue(during, "cm_stream_followers")).toBe(1);
    expect(metricValue(during, "cm_periodic_work_running", { job: "stream-fallback" })).toBe(1);
    expect(metricValue(during, "cm_stream_fallback_reads_total")).toBeGreaterThan(metricValue(before, "cm_stream_fallback_reads_total") ?? 0);
    // What it runs once started, and what it does not (no payout keypair configured here).
    for (const job of ["offline-monitor", "heartbeat-flush", "command-sweep", "metering"])
      expect(metricValue(during, "cm_periodic_work_running", { job }), job).toBe(1);
    expect(metricValue(during, "cm_periodic_work_running", { job: "payouts" })).toBe(0);
    expect(metricValue(during, "cm_periodic_work_turns_total", { job: "heartbeat-flush" })).toBeGreaterThanOrEqual(1);
    await stream.body?.cancel();
    const after = await until(async () => {
      const t = await scrape();
      return metricValue(t, "cm_stream_followers") === 0 ? t : undefined;
    });
    expect(metricValue(after, "cm_periodic_work_running", { job: "stream-fallback" })).toBe(0);
    await node.agent.close();
  });
});

it("lets the loopback in when no token is set, and only the token when one is", () => {
  expect(metricsAllowed(undefined, undefined, "127.0.0.1")).toBe(true);
  expect(metricsAllowed(undefined, undefined, "::1")).toBe(true);
  expect(metricsAllowed(undefined, undefined, "::ffff:127.0.0.1")).toBe(true);
  expect(metricsAllowed(undefined, undefined, "10.0.0.5")).toBe(false);
  expect(metricsAllowed(undefined, undefined, undefined)).toBe(false);
  expect(metricsAllowed(undefined, undefined, "127.0.0.1", true)).toBe(false);
  expect(metricsAllowed("t0ken-of-sixteen!", "Bearer t0ken-of-sixteen!", "127.0.0.1", true)).toBe(true);
  expect(metricsAllowed("t0ken-of-sixteen!", undefined, "127.0.0.1")).toBe(false);
  expect(metricsAllowed("t0ken-of-sixteen!", "Bearer t0ken-of-sixteen?", "127.0.0.1")).toBe(false);
  expect(metricsAllowed("t0ken-of-sixteen!", "Bearer t0ken-of-sixteen!", "10.0.0.5")).toBe(true);
});

it("says the embedded database's pool is its one connection, and counts calls under way", async () => {
  const h = await startHarness(sqliteDatabase);
  try {
    const scrape = () => createMetricsRegistry(h.deps).metrics();
    expect(metricValue(await scrape(), "cm_db_pool_max")).toBe(1);
    // A call under way while the scrape is read: a transaction held open until the scrape is done.
    let release!: () => void;
    const held = h.deps.repos.handle.transaction(() => new Promise<void>((r) => (release = r)));
    await new Promise((r) => setImmediate(r));
    expect(metricValue(await scrape(), "cm_db_calls_in_flight")).toBe(1);
    release();
    await held;
    expect(metricValue(await scrape(), "cm_db_calls_in_flight")).toBe(0);
  } finally {
    await h.close();
  }
});
