// Pure decisions of the reconciler: which GPUs, how much CPU and memory, what to tell the tenant.
import { describe, expect, it } from "vitest";
import { describeExit } from "../../src/reconcile/exit-reason";
import { pickGpus } from "../../src/reconcile/gpu-assignment";
import { containerName, gpusOf, runLabels, runSeqOf } from "../../src/reconcile/labels";
import { containerResources } from "../../src/reconcile/resources";
import type { ContainerState } from "../../src/runtime/types";
import { testGpu } from "../support/agent-harness";

const eight = [7, 3, 0, 1, 2, 4, 5, 6].map(testGpu);

describe("pickGpus", () => {
  it("takes the lowest free indexes", () => {
    expect(pickGpus(eight, new Set(["GPU-test-0", "GPU-test-2"]), 3)).toEqual({ ok: true, uuids: ["GPU-test-1", "GPU-test-3", "GPU-test-4"] });
    expect(pickGpus(eight, new Set(), 0)).toEqual({ ok: true, uuids: [] });
  });

  it("refuses with a reason the tenant can read", () => {
    expect(pickGpus(eight.slice(0, 2), new Set(), 4)).toEqual({ ok: false, reason: "this deployment needs 4 GPUs but this node has 2" });
    expect(pickGpus(eight, new Set(eight.slice(0, 7).map((g) => g.uuid)), 2)).toEqual({
      ok: false,
      reason: "this deployment needs 2 GPUs but only 1 of the node's 8 are free",
    });
  });
});

describe("containerResources", () => {
  const node = { cpuThreads: 64, ramMb: 512_000, gpuCount: 8 };

  it("uses the spec's limits when it gives them: the cores a hard cap unless the spec says they are a default's weight", () => {
    expect(containerResources({ cpuCores: 3.5, memoryMb: 8192, gpuCount: 1 }, node)).toEqual({ cpuCores: 3.5, cpuLimit: "quota", memoryMb: 8192 });
    expect(containerResources({ cpuCores: 0.1, cpuLimit: "quota", gpuCount: 0 }, node)).toMatchObject({ cpuCores: 0.1, cpuLimit: "quota" });
    expect(containerResources({ cpuCores: 0.04, cpuLimit: "weight", gpuCount: 0 }, node)).toMatchObject({ cpuCores: 0.04, cpuLimit: "weight" });
  });

  it("gives a GPU deployment the node's share its GPUs are of all GPUs", () => {
    expect(containerResources({ gpuCount: 2 }, node)).toEqual({ cpuCores: 16, cpuLimit: "weight", memoryMb: Math.floor(512_000 * 0.9 * 0.25) });
    expect(containerResources({ gpuCount: 8 }, node)).toEqual({ cpuCores: 64, cpuLimit: "weight", memoryMb: Math.floor(512_000 * 0.9) });
  });

  it("gives a CPU-only deployment a quarter of the node as its weight, never less than 1 core and 256 MB", () => {
    expect(containerResources({ gpuCount: 0 }, node)).toEqual({ cpuCores: 16, cpuLimit: "weight", memoryMb: 115_200 });
    expect(containerResources({ gpuCount: 0 }, { cpuThreads: 2, ramMb: 512, gpuCount: 0 })).toEqual({ cpuCores: 1, cpuLimit: "weight", memoryMb: 256 });
  });

  it("caps what the node cannot give", () => {
    expect(containerResources({ cpuCores: 128, memoryMb: 2_000_000, gpuCount: 0 }, node)).toEqual({ cpuCores: 64, cpuLimit: "quota", memoryMb: 460_800 });
  });
});

describe("describeExit", () => {
  it.each([
    [{ exitCode: 3, oomKilled: false, error: "" }, undefined, "the container exited with code 3"],
    [{ exitCode: 0, oomKilled: false, error: "" }, undefined, "the container exited with code 0"],
    [{ exitCode: 137, oomKilled: true, error: "" }, 512, "the container ran out of memory (limit 512 MB) and was killed (exit code 137)"],
    [{ exitCode: 137, oomKilled: false, error: "" }, undefined, "the container was killed by SIGKILL (exit code 137)"],
    [{ exitCode: 139, oomKilled: false, error: "" }, undefined, "the container was killed by SIGSEGV (exit code 139)"],
    [
      { exitCode: 127, oomKilled: false, error: 'exec: "python": executable file not found in $PATH' },
      undefined,
      'the container stopped with an error: exec: "python": executable file not found in $PATH (exit code 127)',
    ],
  ])("%j", (exit, memoryMb, reason) => {
    expect(describeExit(exit, memoryMb)).toBe(reason);
  });
});

describe("labels", () => {
  const state = (labels: Record<string, string>) => ({ labels }) as unknown as ContainerState;

  it("round-trips the run and the GPUs", () => {
    const labels = runLabels(7, ["GPU-a", "GPU-b"]);
    expect(runSeqOf(state(labels))).toBe(7);
    expect(gpusOf(state(labels))).toEqual(["GPU-a", "GPU-b"]);
    expect(gpusOf(state(runLabels(1, [])))).toEqual([]);
    expect(runSeqOf(state({}))).toBe(-1);
  });

  it("names containers after deployment and run", () => {
    expect(containerName("dep_abc", 3)).toBe("cm-dep_abc-run3");
    expect(containerName("dep/../x", 1)).toBe("cm-dep-..-x-run1");
  });
});
