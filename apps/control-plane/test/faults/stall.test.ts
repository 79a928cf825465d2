import { needs } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type FaultSystem, sleep, startFaultSystem } from "./support/fault-system";

// Heartbeats every 5 s (a node is offline after 15 s of silence): a busy 2-core
// machine can starve a process for a few seconds, and that must not read as a lost node.
const HEARTBEAT_MS = 5000;
// Longer than the agent's own patience (a ping every 15 s, 10 s for its pong):
// it drops the silent socket and reconnects while the control plane is stopped.
const STALL_MS = 30_000;

needs("docker", "busybox", "postgres-server").describe("a stalled control plane (SIGSTOP, then SIGCONT)", () => {
  let sys: FaultSystem;
  const figures: Record<string, unknown> = {};

  beforeAll(async () => {
    sys = await startFaultSystem({ heartbeatIntervalMs: HEARTBEAT_MS });
    await sys.startAgent();
  });
  afterAll(async () => {
    console.info("[faults] stalled control plane:", JSON.stringify(figures));
    await sys?.close();
  });

  it("does not blame the agent for the time it was not running itself, nor charge the tenant for what nobody could prove", async () => {
    const id = await sys.deploy();
    await sys.waitStatus(id, "running");
    await sleep(1000);

    sys.cp.signal("SIGSTOP");
    await sleep(STALL_MS);
    sys.cp.signal("SIGCONT");
    const resumedAt = Date.now();

    // Judged on what arrives after it resumed: the agent is back within a window.
    await sleep(3 * HEARTBEAT_MS + 2000);
    expect((await sys.call("GET", `/nodes/${sys.nodeId}`)).json.node.status, sys.cp.tail(30)).toBe("online");
    expect((await sys.deployment(id)).status).toBe("running");
    expect(sys.runs.isRunning(id)).toBe(true);
    figures.checkedAfterResumeMs = Date.now() - resumedAt;

    const stop = await sys.stop(id);
    await sys.waitStatus(id, "stopped");
    await sys.checkBooks();
    // Charged for what the agent proved: its heartbeats read after the resume (those it sent before it
    // dropped the silent socket), then from its report of the container running on its new connection.
    // The gap between is not charged, and is never longer than the stall and a heartbeat.
    const dep = (await sys.repos.deployments.getOnNode(id, sys.nodeId))!;
    const ranMs = sys.runs.ranMs(id, stop.askedAtMs);
    figures.billing = { billedS: dep.billedMs / 1000, ranS: ranMs / 1000, unprovenS: (ranMs - dep.billedMs) / 1000 };
    expect(dep.billedMs, JSON.stringify(figures)).toBeLessThanOrEqual(ranMs + 500);
    expect(ranMs - dep.billedMs, JSON.stringify(figures)).toBeLessThanOrEqual(STALL_MS + HEARTBEAT_MS + stop.ms);
    figures.lines = await sys.lineCounts(id);
    expect(figures.lines, "no line lost or repeated").toMatchObject({ lost: 0, repeated: 0 });
    await sys.checkNothingUnwanted();
  }, 180_000);
});
