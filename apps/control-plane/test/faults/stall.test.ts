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

  it("does not blame the agent for the time it was not running itself", async () => {
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
    figures.billing = await sys.checkBilled(id, 500 + stop.ms, stop.askedAtMs);
    figures.lines = await sys.lineCounts(id);
    expect(figures.lines, "no line lost or repeated").toMatchObject({ lost: 0, repeated: 0 });
    await sys.checkNothingUnwanted();
  }, 180_000);
});
