import { needs } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type FaultSystem, sleep, startFaultSystem, until } from "./support/fault-system";

// A node is offline after 12 s of silence: longer than the agent is away here.
const HEARTBEAT_MS = 4000;

needs("docker", "busybox", "postgres-server").describe("stop and delete while the agent is away", () => {
  let sys: FaultSystem;
  const figures: Record<string, unknown> = {};

  beforeAll(async () => {
    // The meter charges once a minute: nothing but the stop itself bills these seconds.
    sys = await startFaultSystem({ heartbeatIntervalMs: HEARTBEAT_MS, meterIntervalMs: 60_000 });
    await sys.startAgent();
  });
  afterAll(async () => {
    console.info("[faults] agent away:", JSON.stringify(figures));
    await sys?.close();
  });

  it("bills up to the agent's last proof of life, and the returning agent stops the containers", async () => {
    const stopped = await sys.deploy();
    const deleted = await sys.deploy();
    await sys.waitStatus(stopped, "running");
    await sys.waitStatus(deleted, "running");
    await sleep(5000);

    sys.agent!.signal("SIGKILL");
    await sys.agent!.exited;
    const killedAt = Date.now();
    await sleep(1000);
    expect((await sys.call("POST", `/deployments/${stopped}/stop`, { token: sys.token })).status).toBe(200);
    expect((await sys.call("DELETE", `/deployments/${deleted}`, { token: sys.token })).status).toBe(200);

    // Billed to the last heartbeat or report: at most one interval short of the kill.
    const billing: unknown[] = [];
    figures.billing = billing;
    for (const id of [stopped, deleted]) {
      const dep = (await sys.repos.deployments.getOnNode(id, sys.nodeId))!;
      const ranUntilKillMs = sys.runs.ranMs(id, killedAt);
      const f = { id, billedS: dep.billedMs / 1000, ranUntilAgentLostS: ranUntilKillMs / 1000 };
      billing.push(f);
      expect(dep.billedMs, JSON.stringify(f)).toBeGreaterThanOrEqual(ranUntilKillMs - HEARTBEAT_MS - 250);
      expect(dep.billedMs, JSON.stringify(f)).toBeLessThanOrEqual(ranUntilKillMs + 250);
    }
    await sys.checkBooks();

    const backAt = Date.now();
    await sys.startAgent();
    await until("the returning agent stops both", async () => !sys.runs.isRunning(stopped) && !sys.runs.isRunning(deleted), 30_000);
    figures.convergedAfterAgentBackMs = Date.now() - backAt;
    await sys.checkBooks();
    await sys.checkNothingUnwanted();
  }, 180_000);
});
