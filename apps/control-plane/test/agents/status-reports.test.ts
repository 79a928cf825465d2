import type { DeploymentRow } from "@cm/db";
import { restartDelayMs } from "@cm/protocol";
import { describe, expect, it } from "vitest";
import { planReport, pullReason, reportTimeMs } from "../../src/agents/status-reports";
import { affordableMs, costMicro } from "../../src/services/charges";

const dep = (o: Partial<DeploymentRow> = {}): DeploymentRow => ({
  id: "dep_1",
  userId: "usr_1",
  nodeId: "node_1",
  templateId: null,
  name: null,
  image: "busybox",
  status: "pending",
  desiredState: "running",
  statusReason: null,
  exitCode: null,
  env: {},
  ports: [],
  tcpPorts: [],
  command: null,
  entrypoint: null,
  registryCredentialId: null,
  restartPolicy: "no",
  maxRestarts: 0,
  restartCount: 0,
  endpoints: [],
  hourlyRateCents: 50,
  totalCostMicro: 0,
  reservedMicro: 0,
  billedUntil: null,
  billedMs: 0,
  runSeq: 2,
  createdAt: 0,
  startedAt: null,
  stoppedAt: null,
  updatedAt: 0,
  deletedAt: null,
  removedFromNodeAt: null,
  gpuCount: 0,
  cpuMillicores: 0,
  cpuLimit: "weight",
  memoryMb: 0,
  diskGb: null,
  endpointKey: "k",
  ...o,
});
const at = 1_000_000;

describe("planReport", () => {
  it("climbs towards running, never back down, and only for the current run", () => {
    expect(planReport(dep(), { at, runSeq: 2, status: "pulling" }, at)).toEqual({ kind: "move", to: "pulling", patch: { statusReason: "pulling image" } });
    expect(planReport(dep({ status: "pulling" }), { at, runSeq: 2, status: "running" }, at)).toEqual({
      kind: "move",
      to: "running",
      patch: { startedAt: at, billedUntil: at, statusReason: null, exitCode: null },
    });
    expect(planReport(dep({ status: "running" }), { at, runSeq: 2, status: "starting" }, at).kind).toBe("ignore");
    expect(planReport(dep({ status: "running", billedUntil: at - 1000 }), { at, runSeq: 2, status: "running" }, at).kind).toBe("ignore");
    expect(planReport(dep(), { at, runSeq: 1, status: "running" }, at).kind).toBe("ignore");
    expect(planReport(dep(), { at, runSeq: 3, status: "running" }, at).kind).toBe("ignore");
    expect(planReport(dep({ status: "stopping", desiredState: "stopped" }), { at, runSeq: 2, status: "running" }, at).kind).toBe("ignore");
  });

  it("resumes the charges of a running deployment whose agent is back from its report, clearing the unreachable note", () => {
    const paused = dep({ status: "running", billedUntil: null, startedAt: at - 60_000, statusReason: "node unreachable since ..." });
    expect(planReport(paused, { at, runSeq: 2, status: "running" }, at + 100)).toEqual({
      kind: "move",
      to: "running",
      patch: { billedUntil: at, statusReason: null },
    });
    const restarted = dep({ status: "running", billedUntil: null, restartPolicy: "on-failure", maxRestarts: 3, restartCount: 1 });
    expect(planReport(restarted, { at, runSeq: 2, status: "running" }, at)).toMatchObject({ patch: { statusReason: "running again after restart 1 of 3" } });
    // An older run's report never resumes anything.
    expect(planReport(paused, { at, runSeq: 1, status: "running" }, at).kind).toBe("ignore");
  });

  it("turns an exit into exited with the code, whatever it is, unless the stop was asked for", () => {
    const running = dep({ status: "running" });
    expect(planReport(running, { at, runSeq: 2, status: "exited", exitCode: 0 }, at)).toEqual({
      kind: "move",
      to: "exited",
      patch: { desiredState: "stopped", exitCode: 0, statusReason: "the container exited with code 0", stoppedAt: at },
      settleUntilMs: at,
    });
    expect(planReport(running, { at, runSeq: 2, status: "exited", exitCode: 2 }, at)).toMatchObject({
      to: "exited",
      patch: { exitCode: 2, statusReason: "the container exited with code 2" },
    });
    expect(planReport(dep({ status: "stopping", desiredState: "stopped" }), { at, runSeq: 2, status: "exited", exitCode: 143 }, at)).toEqual({
      kind: "move",
      to: "stopped",
      patch: { exitCode: 143, stoppedAt: at },
      settleUntilMs: at,
    });
    expect(planReport(dep({ status: "stopping", desiredState: "stopped" }), { at, runSeq: 2, status: "stopped" }, at)).toEqual({
      kind: "move",
      to: "stopped",
      patch: { stoppedAt: at },
      settleUntilMs: at,
    });
    expect(planReport(running, { at, runSeq: 2, status: "stopped" }, at)).toMatchObject({
      to: "stopped",
      patch: { desiredState: "stopped", statusReason: "the container was stopped on the node" },
    });
    expect(planReport(dep({ status: "stopped", desiredState: "stopped" }), { at, runSeq: 2, status: "exited", exitCode: 1 }, at).kind).toBe("ignore");
  });

  it("restarts a non-zero exit under on-failure as a new run until maxRestarts, then ends saying so", () => {
    const onFailure = (restartCount: number) => dep({ status: "running", restartPolicy: "on-failure", maxRestarts: 3, restartCount });
    expect(planReport(onFailure(0), { at, runSeq: 2, status: "exited", exitCode: 1 }, at + 500)).toEqual({
      kind: "move",
      to: "starting",
      patch: { exitCode: 1, restartCount: 1, statusReason: "the container exited with code 1; restarting (1 of 3) in 1 s" },
      // Charged up to the exit, and nothing until the next run reports running.
      settleUntilMs: at,
    });
    expect(planReport(onFailure(3), { at, runSeq: 2, status: "exited", exitCode: 1 }, at)).toMatchObject({
      to: "exited",
      patch: { desiredState: "stopped", exitCode: 1, statusReason: "the container exited with code 1; not restarted: all 3 restarts were used" },
    });
    // Each restart waits longer, doubling from 1 s, never more than 30 s.
    expect([1, 2, 3, 4, 5, 6, 10].map(restartDelayMs)).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
    const sixth = dep({ status: "running", restartPolicy: "on-failure", maxRestarts: 10, restartCount: 5 });
    expect(planReport(sixth, { at, runSeq: 2, status: "exited", exitCode: 1 }, at)).toMatchObject({
      to: "starting",
      patch: { restartCount: 6, statusReason: "the container exited with code 1; restarting (6 of 10) in 30 s" },
    });
    // A clean exit is not a failure; "no" never restarts; a stop asked for is not undone.
    expect(planReport(onFailure(0), { at, runSeq: 2, status: "exited", exitCode: 0 }, at)).toMatchObject({ to: "exited" });
    expect(planReport(dep({ status: "running" }), { at, runSeq: 2, status: "exited", exitCode: 1 }, at)).toMatchObject({
      to: "exited",
      patch: { statusReason: "the container exited with code 1" },
    });
    const stopping = dep({ status: "stopping", desiredState: "stopped", restartPolicy: "on-failure", maxRestarts: 3 });
    expect(planReport(stopping, { at, runSeq: 2, status: "exited", exitCode: 137 }, at)).toMatchObject({ to: "stopped" });
    // Running again after a restart says so.
    expect(
      planReport(dep({ status: "starting", restartPolicy: "on-failure", maxRestarts: 3, restartCount: 2 }), { at, runSeq: 2, status: "running" }, at),
    ).toMatchObject({ to: "running", patch: { statusReason: "running again after restart 2 of 3" } });
  });

  it("finalizes removal only for a deleted deployment", () => {
    expect(planReport(dep({ status: "stopped", desiredState: "removed" }), { at, runSeq: 2, status: "removed" }, at)).toEqual({ kind: "removed" });
    expect(planReport(dep({ status: "running" }), { at, runSeq: 2, status: "removed" }, at)).toMatchObject({
      to: "failed",
      patch: { desiredState: "stopped" },
    });
    expect(planReport(dep({ status: "stopped", desiredState: "stopped" }), { at, runSeq: 2, status: "removed" }, at).kind).toBe("ignore");
  });

  it("dates running and ends by the agent's time, not by when the report arrived", () => {
    const nowMs = at + 60_000;
    expect(planReport(dep({ status: "starting" }), { at, runSeq: 2, status: "running" }, nowMs)).toMatchObject({ patch: { startedAt: at, billedUntil: at } });
    const running = dep({ status: "running", startedAt: at, billedUntil: at + 5_000 });
    expect(planReport(running, { at: at + 7_000, runSeq: 2, status: "exited", exitCode: 0 }, nowMs)).toMatchObject({
      settleUntilMs: at + 7_000,
      patch: { stoppedAt: at + 7_000 },
    });
  });

  it("holds the agent's time within what can be true", () => {
    const nowMs = at + 60_000;
    const running = { status: "running" as const, createdAt: at - 1000, startedAt: at, billedUntil: at + 2000 };
    expect(reportTimeMs(running, { at: nowMs + 5000, status: "stopped" }, nowMs)).toBe(nowMs); // never in the future
    expect(reportTimeMs(running, { at: at - 500, status: "stopped" }, nowMs)).toBe(at + 2000); // never before what was billed
    const fresh = { status: "starting" as const, createdAt: at, startedAt: null, billedUntil: null };
    expect(reportTimeMs(fresh, { at: at - 10_000, status: "running" }, nowMs)).toBe(at); // never before it was asked for
    const again = { status: "starting" as const, createdAt: at, startedAt: at + 1000, billedUntil: at + 9000 };
    expect(reportTimeMs(again, { at: at + 5000, status: "running" }, nowMs)).toBe(at + 9000); // a new run starts after the last one was billed
  });

  it("writes pull progress for people", () => {
    expect(pullReason({ layersDone: 3, layersTotal: 7 })).toBe("pulling image: 3/7 layers");
    expect(pullReason({ layersDone: 3, layersTotal: 7, bytesDone: 120e6, bytesTotal: 800e6 })).toBe("pulling image: 3/7 layers, 120 of 800 MB");
  });
});

describe("costMicro", () => {
  it("is floor(rate * 1e6 * ms / 3.6e6), exact far past 2^53 intermediate products", () => {
    expect(costMicro(50, 60_000)).toBe(833_333);
    expect(costMicro(50, 3_600_000)).toBe(50_000_000);
    expect(costMicro(7, 1)).toBe(1);
    expect(costMicro(1, 3599)).toBe(999);
    const tenYearsMs = 10 * 365 * 24 * 3_600_000;
    expect(costMicro(100_000, tenYearsMs)).toBe(100_000 * 1_000_000 * 10 * 365 * 24);
  });

  it("affordableMs is the longest time whose cost fits the budget", () => {
    for (const [rate, budget] of [
      [50, 833_333],
      [7, 1],
      [7, 123_456_789],
      [99_999, 5],
    ] as const) {
      const ms = affordableMs(rate, budget);
      expect(costMicro(rate, ms)).toBeLessThanOrEqual(budget);
      expect(costMicro(rate, ms + 1)).toBeGreaterThan(budget);
    }
  });
});
