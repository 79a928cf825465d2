import { AGENT_RECONNECT_MAX_MS } from "@cm/protocol";
import { needs } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type FaultSystem, sleep, startFaultSystem } from "./support/fault-system";

// Short heartbeats (a node is offline after 6 s of silence), where a restart of
// the control plane shorter than that window used to read as a lost node: the
// window ran from the agent's last heartbeat before the restart. Then an agent
// that backed off longer than the window while the control plane was away.
const HEARTBEAT_MS = 2000;
const DOWN_MS = 2500;

needs("docker", "busybox", "postgres-server").describe("a control plane restarted within the offline window", () => {
  let sys: FaultSystem;
  const figures: Record<string, unknown> = {};

  beforeAll(async () => {
    sys = await startFaultSystem({ heartbeatIntervalMs: HEARTBEAT_MS });
    await sys.startAgent();
  });
  afterAll(async () => {
    console.info("[faults] control plane restarted:", JSON.stringify(figures));
    await sys?.close();
  });

  it("keeps the node and its deployment, charging nothing for the restart's gap: the window runs from when it could hear the agent again, backoff included", async () => {
    const id = await sys.deploy();
    await sys.waitStatus(id, "running");
    await sleep(1000);

    const stoppedAt = Date.now();
    await sys.restartControlPlane(DOWN_MS);
    const listeningAt = Date.now();
    figures.downMs = listeningAt - stoppedAt;
    // The agent comes back when its backoff says (up to 8 s after a 4 s outage here).
    await sys.cp.waitForLine(/agent connected/, AGENT_RECONNECT_MAX_MS + 10_000);
    figures.reconnectedAfterMs = Date.now() - listeningAt;

    // Past a whole window after it reconnected: the agent heartbeats.
    await sleep(3 * HEARTBEAT_MS + 2000);
    expect(sys.cp.tail(200), "the node was never found silent").not.toMatch(/node offline/);
    expect((await sys.call("GET", `/nodes/${sys.nodeId}`)).json.node.status, sys.cp.tail(30)).toBe("online");
    expect((await sys.deployment(id)).status, sys.cp.tail(30)).toBe("running");
    expect(sys.runs.isRunning(id)).toBe(true);

    const stop = await sys.stop(id);
    await sys.waitStatus(id, "stopped");
    await sys.checkBooks();
    // Charged for what was proven: up to the agent's last heartbeat before the restart, and again from
    // its report of the container running after it. The container ran throughout; the gap is not charged.
    const dep = (await sys.repos.deployments.getOnNode(id, sys.nodeId))!;
    const ranMs = sys.runs.ranMs(id, stop.askedAtMs);
    const gapMs = (figures.downMs as number) + (figures.reconnectedAfterMs as number);
    figures.billing = { billedS: dep.billedMs / 1000, ranS: ranMs / 1000, unprovenS: (ranMs - dep.billedMs) / 1000 };
    expect(dep.billedMs, JSON.stringify(figures)).toBeLessThanOrEqual(ranMs - (figures.downMs as number) + 500);
    expect(dep.billedMs, JSON.stringify(figures)).toBeGreaterThanOrEqual(ranMs - gapMs - HEARTBEAT_MS - 1000 - stop.ms);
    figures.lines = await sys.lineCounts(id);
    expect(figures.lines, "no line lost or repeated").toMatchObject({ lost: 0, repeated: 0 });
    await sys.checkNothingUnwanted();
  }, 180_000);
});
