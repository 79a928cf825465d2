import { describe, expect, it } from "vitest";
import type { Clock } from "../../src/clock";
import { StatusReporter } from "../../src/reconcile/status-reporter";

function setup() {
  let nowMs = 1_000;
  const clock = { now: () => nowMs } as Clock;
  const reliable: unknown[] = [];
  const unreliable: unknown[] = [];
  const reporter = new StatusReporter({ reliable: (f) => reliable.push(f), unreliable: (f) => (unreliable.push(f), true) }, clock);
  return { reporter, reliable, unreliable, advance: (ms: number) => (nowMs += ms) };
}

describe("StatusReporter", () => {
  it("sends status reports with the run, the time and only the details it has", () => {
    const { reporter, reliable } = setup();
    reporter.status("dep_1", 4, "exited", { exitCode: 3, reason: "the container exited with code 3" });
    reporter.status("dep_1", 5, "running");
    reporter.status("dep_1", 5, "failed", { reason: "x".repeat(3000) });
    expect(reliable[0]).toEqual({
      type: "status",
      deploymentId: "dep_1",
      runSeq: 4,
      status: "exited",
      exitCode: 3,
      reason: "the container exited with code 3",
      at: 1_000,
    });
    expect(reliable[1]).toEqual({ type: "status", deploymentId: "dep_1", runSeq: 5, status: "running", at: 1_000 });
    // Whole: the connection clamps every frame it sends to the wire's limits.
    expect((reliable[2] as { reason: string }).reason).toHaveLength(3000);
  });

  it("sends pull progress at most every 500 ms per deployment, and always the last", () => {
    const { reporter, unreliable, advance } = setup();
    reporter.pullProgress("dep_1", { layersDone: 0, layersTotal: 3 });
    reporter.pullProgress("dep_1", { layersDone: 1, layersTotal: 3 });
    reporter.pullProgress("dep_2", { layersDone: 0, layersTotal: 1 });
    advance(500);
    reporter.pullProgress("dep_1", { layersDone: 2, layersTotal: 3, bytesDone: 10, bytesTotal: 20 });
    reporter.pullProgress("dep_1", { layersDone: 3, layersTotal: 3, bytesDone: 20, bytesTotal: 20 });
    expect(unreliable).toEqual([
      { type: "pull_progress", deploymentId: "dep_1", layersDone: 0, layersTotal: 3 },
      { type: "pull_progress", deploymentId: "dep_2", layersDone: 0, layersTotal: 1 },
      { type: "pull_progress", deploymentId: "dep_1", layersDone: 2, layersTotal: 3, bytesDone: 10, bytesTotal: 20 },
      { type: "pull_progress", deploymentId: "dep_1", layersDone: 3, layersTotal: 3, bytesDone: 20, bytesTotal: 20 },
    ]);
  });
});
