import { needs } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type FaultSystem, sleep, startFaultSystem, until } from "./support/fault-system";

// A window (15 s) longer than the stall, so only billing is under test here.
const HEARTBEAT_MS = 5000;
const STALL_MS = 5000;

needs("docker", "busybox", "postgres-server").describe("billing by the agent's times, not by when reports arrive", () => {
  let sys: FaultSystem;
  const figures: Record<string, unknown> = {};

  beforeAll(async () => {
    sys = await startFaultSystem({ heartbeatIntervalMs: HEARTBEAT_MS });
    await sys.startAgent();
  });
  afterAll(async () => {
    console.info("[faults] agent times:", JSON.stringify(figures));
    await sys?.close();
  });

  it("bills a container that ended, and one that started, while the control plane was stopped, for the seconds they ran", async () => {
    // Ends by itself about 4 s after it starts: inside the stall below.
    const ends = await sys.deploy(`i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo "$i"; sleep 0.1; done`);
    await sys.waitStatus(ends, "running");
    // Reaches running during the stall: the control plane is stopped as soon as Docker has its container.
    const starts = await sys.deploy();
    await sys.runs.created(starts);
    sys.cp.signal("SIGSTOP");
    const stalledAt = Date.now();
    await sleep(STALL_MS);
    sys.cp.signal("SIGCONT");
    const resumedAt = Date.now();

    await sys.waitStatus(ends, "exited");
    await sys.waitStatus(starts, "running");
    figures.convergedAfterMs = Date.now() - resumedAt;
    await sleep(1000);
    const stop = await sys.stop(starts);
    await sys.waitStatus(starts, "stopped");
    await until("the container gone", async () => !sys.runs.isRunning(starts));

    // The scenario happened as meant: one ended and one started while the control plane was stopped.
    const [endRun] = sys.runs.runs.get(ends)!;
    const [startRun] = sys.runs.runs.get(starts)!;
    expect(endRun!.endMs).toBeGreaterThan(stalledAt);
    expect(endRun!.endMs).toBeLessThan(resumedAt);
    expect(startRun!.startMs).toBeGreaterThan(stalledAt - 200);
    await sys.checkBooks();
    figures.endedDuringStall = await sys.checkBilled(ends, 300);
    figures.startedDuringStall = await sys.checkBilled(starts, 300 + stop.ms, stop.askedAtMs);
    await sys.checkNothingUnwanted();
  }, 180_000);
});
