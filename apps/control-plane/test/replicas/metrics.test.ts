import { needs } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { metricsAllowed } from "../../src/http/metrics";
import type { AgentHarness } from "../agents/support/agent-harness";
import { type ReplicaPair, startReplicaPair } from "./support/pair";

/** A metric's value in Prometheus' text format, or undefined. */
const metricValue = (text: string, name: string) => {
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(" ")[1]);
};

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
