import { needs } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type FaultSystem, sleep, startFaultSystem, until } from "./support/fault-system";

// Heartbeats every 5 s: a node is offline after 15 s of silence. Each outage is
// a little shorter than that window, as a 20-27 s outage is under the default 30 s one.
const HEARTBEAT_MS = 5000;
const REFUSED_MS = 5000;
const HUNG_MS = 14_000;

needs("docker", "busybox", "postgres-server").describe("database outages", () => {
  let sys: FaultSystem;
  let ids: string[] = [];
  const figures: Record<string, unknown> = {};

  beforeAll(async () => {
    sys = await startFaultSystem({ heartbeatIntervalMs: HEARTBEAT_MS });
    await sys.startAgent();
    // Containers that write fast keep log frames (database writes) in flight when the database goes.
    ids = await Promise.all([1, 2, 3].map(() => sys.deploy(`i=0; while true; do i=$((i+1)); echo "$i"; sleep 0.02; done`)));
    for (const id of ids) await sys.waitStatus(id, "running");
  });
  afterAll(async () => {
    console.info("[faults] database outages:", JSON.stringify(figures));
    await sys?.close();
  });

  it("while the database refuses connections: /health stays 200, /ready and API calls answer 503 at once with Retry-After", async () => {
    expect((await sys.call("GET", "/ready")).status).toBe(200);
    await sys.pg.stop();
    const downAt = Date.now();
    expect((await sys.call("GET", "/health")).status).toBe(200);
    const ready = await sys.call("GET", "/ready");
    expect(ready.status).toBe(503);
    expect(ready.json.error.code).toBe("SERVICE_UNAVAILABLE");
    const list = await sys.call("GET", "/deployments", { token: sys.token });
    figures.refusedApiMs = list.ms;
    expect(list.status).toBe(503);
    expect(list.json.error.code).toBe("SERVICE_UNAVAILABLE");
    expect(list.json.error.requestId).toBeTruthy();
    expect(Number(list.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(list.ms).toBeLessThan(1000);
    await sleep(REFUSED_MS - (Date.now() - downAt));
    await sys.pg.start();
    const upAt = Date.now();
    await until("ready again", async () => (await sys.call("GET", "/ready")).status === 200, 30_000);
    await until("the API again", async () => (await sys.call("GET", "/deployments", { token: sys.token })).status === 200, 30_000);
    figures.refusedRecoveredAfterMs = Date.now() - upAt;
    for (const id of ids) expect((await sys.deployment(id)).status).toBe("running");
  }, 120_000);

  it("while the database hangs (its processes stopped): no healthy node is declared lost, and the seconds that ran are billed", async () => {
    sys.pg.freeze();
    const hungAt = Date.now();
    // Once the probe has noticed (a second or two), calls fail fast instead of hanging with the queries.
    await sleep(3000);
    const list = await sys
      .call("GET", "/deployments", { token: sys.token, timeoutMs: HUNG_MS + 10_000 })
      .catch((err: unknown) => ({ status: 0, ms: -1, err: String(err) }));
    figures.hungApiMs = list.ms;
    expect(list.status).toBe(503);
    await sleep(HUNG_MS - (Date.now() - hungAt));
    sys.pg.thaw();
    const upAt = Date.now();
    await until("the API again", async () => (await sys.call("GET", "/deployments", { token: sys.token })).status === 200, 30_000);
    figures.hungRecoveredAfterMs = Date.now() - upAt;

    // A whole offline window later the node is still online and nothing was failed or stopped.
    await sleep(3 * HEARTBEAT_MS + 1000);
    expect((await sys.call("GET", `/nodes/${sys.nodeId}`)).json.node.status, sys.cp.tail(30)).toBe("online");
    for (const id of ids) {
      expect((await sys.deployment(id)).status, sys.cp.tail(30)).toBe("running");
      expect(sys.runs.isRunning(id)).toBe(true);
    }

    const stops: Array<{ askedAtMs: number; ms: number }> = [];
    for (const id of ids) stops.push(await sys.stop(id));
    for (const id of ids) await sys.waitStatus(id, "stopped");
    await until("containers gone", async () => ids.every((id) => !sys.runs.isRunning(id)), 30_000);
    await sys.checkBooks();
    figures.billing = await Promise.all(ids.map((id, i) => sys.checkBilled(id, 500 + stops[i]!.ms, stops[i]!.askedAtMs)));
    const lines = await Promise.all(ids.map((id) => sys.lineCounts(id)));
    figures.lines = lines;
    for (const l of lines) expect(l, "no line lost or repeated").toMatchObject({ lost: 0, repeated: 0 });
    await sys.checkNothingUnwanted();
  }, 180_000);
});
