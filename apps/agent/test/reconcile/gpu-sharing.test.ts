// Two tenants on one 8-GPU node get disjoint GPUs, whatever the order they
// start in and across an agent restart. The node's GPUs are what nvidia-smi
// says of a real H100, made eight (fixtures/nvidia-smi/README.md), parsed by
// the agent's own parser and handed to the reconciler as its view of the host.
import { describe, expect, it } from "vitest";
import { parseNvidiaSmiOutput } from "../../src/host/nvidia-smi";
import { readFixture } from "../support/fixtures";
import { IMAGE, reconcilerHarness, spec } from "../support/reconciler-harness";

const { gpus: eightH100 } = parseNvidiaSmiOutput(readFixture("nvidia-smi/h100-8x-derived.txt"));

describe("GPUs shared by deployments on one node", () => {
  it("reads the real capture and the 8-GPU machine derived from it", () => {
    const [captured] = parseNvidiaSmiOutput(readFixture("nvidia-smi/h100-80gb-hbm3-captured.txt")).gpus;
    expect(captured).toMatchObject({ index: 0, uuid: "GPU-beacc9ff-01ee-d0b7-9acf-6ef2ec220e0b", name: "NVIDIA H100 80GB HBM3", vramMb: 81559 });
    expect(eightH100).toHaveLength(8);
    expect(new Set(eightH100.map((g) => g.uuid)).size).toBe(8);
  });

  it("gives two tenants disjoint GPUs, refuses a third what is not free, and a restarted agent still sees what is held", async () => {
    const h = reconcilerHarness({ gpus: eightH100 });
    h.engine.loadImage(IMAGE);
    await h.settle(
      h.reconciler.sync([
        spec("dep_tenant_a", { userId: "usr_a", gpuCount: 3, cpuCores: 6, memoryMb: 8192 }),
        spec("dep_tenant_b", { userId: "usr_b", gpuCount: 4, cpuCores: 8, memoryMb: 16_384 }),
      ]),
    );
    const gpusOf = (engine: typeof h.engine, deploymentId: string) => engine.ps().find((c) => c.spec.deploymentId === deploymentId)?.spec.gpuDeviceIds ?? [];
    const a = gpusOf(h.engine, "dep_tenant_a");
    const b = gpusOf(h.engine, "dep_tenant_b");
    expect(a).toHaveLength(3);
    expect(b).toHaveLength(4);
    expect(a.filter((uuid) => b.includes(uuid))).toEqual([]);
    expect([...a, ...b].every((uuid) => eightH100.some((g) => g.uuid === uuid))).toBe(true);
    // The limits asked for are the container's.
    expect(h.engine.ps().find((c) => c.spec.deploymentId === "dep_tenant_b")?.spec).toMatchObject({ cpuCores: 8, memoryMb: 16_384 });

    // The agent restarts: a new reconciler over the same containers knows the 7 held GPUs from their labels.
    const after = reconcilerHarness({ gpus: eightH100, engine: h.engine });
    await after.settle(after.reconciler.command("create", spec("dep_tenant_c", { userId: "usr_c", gpuCount: 2 })));
    expect(after.lastStatus("dep_tenant_c")).toMatchObject({ status: "failed", reason: "this deployment needs 2 GPUs but only 1 of the node's 8 are free" });
    await after.settle(after.reconciler.command("create", spec("dep_tenant_d", { userId: "usr_d", gpuCount: 1 })));
    const d = gpusOf(after.engine, "dep_tenant_d");
    expect(d).toHaveLength(1);
    expect([...a, ...b]).not.toContain(d[0]);
  });
});
