// GPUs as the unit: a deployment holds some of a node's GPUs, CPU and memory,
// pays the node's rate per GPU, and a node takes what it has room for, no more.
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { toSpec } from "../../src/agents/desired-state";
import { type Harness, startHarness } from "../support/harness";

const H100 = { name: "NVIDIA H100 80GB HBM3", vramMb: 81559 };
const gpus = (n: number) => Array.from({ length: n }, () => H100);

describeEachDatabase("deployment resources on $name", (db) => {
  let h: Harness;
  let tenant: Awaited<ReturnType<Harness["signIn"]>>;
  let op: Awaited<ReturnType<Harness["signIn"]>>;

  beforeAll(async () => {
    h = await startHarness(db);
    op = await h.signIn();
    tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 100_000);
  });
  afterAll(() => h.close());

  const create = (body: unknown, token = tenant.token) => h.call("POST", "/deployments", { token, body });
  /** A 4-GPU node of 32 cores and 128,000 MB (the harness's; 115,200 MB of it for deployments), at 100 credits per GPU-hour. */
  const fourGpuNode = async (o: { maxDeployments?: number } = {}) =>
    (await h.onlineNode(op.token, { gpus: gpus(4), hourlyRateCents: 100, maxDeployments: o.maxDeployments ?? 16 })).id;
  const held = async (nodeId: string) => {
    const n = await h.deps.repos.nodes.get(nodeId);
    return { gpus: n!.usedGpus, cpuMillicores: n!.usedCpuMillicores, memoryMb: n!.usedMemoryMb, slots: n!.activeDeployments };
  };

  it("holds the GPUs asked for with the node's share of CPU and memory per GPU, at the node's rate per GPU, fixed and shown", async () => {
    const node = await fourGpuNode();
    const r = await create({ nodeId: node, customImage: "busybox", gpuCount: 2 });
    expect(r.status).toBe(201);
    expect(r.json.estimatedHourlyCost).toBe(200);
    expect(r.json.deployment).toMatchObject({ gpuCount: 2, cpuCores: 16, memoryMb: 57_600, hourlyRateCents: 200 });
    // An hour of its own rate is held, not the node's.
    expect((await h.deps.repos.deployments.get(r.json.deployment.id))!.reservedMicro).toBe(200_000_000);
    expect(await held(node)).toEqual({ gpus: 2, cpuMillicores: 16_000, memoryMb: 57_600, slots: 1 });
    // The operator changing the node's price later does not change a deployment's.
    await h.deps.repos.handle.run((d) => d.update(h.deps.repos.handle.t.nodes).set({ hourlyRateCents: 500 }));
    const shown = await h.call("GET", `/deployments/${r.json.deployment.id}`, { token: tenant.token });
    expect(shown.json.deployment.hourlyRateCents).toBe(200);
  });

  it("defaults: a GPU template takes 1 GPU, a custom image none and a small machine's worth, and asked-for values win", async () => {
    const node = await fourGpuNode({ maxDeployments: 8 });
    const tpl = await create({ nodeId: node, templateId: "ollama" });
    expect(tpl.status).toBe(201);
    expect(tpl.json.deployment).toMatchObject({ gpuCount: 1, cpuCores: 8, memoryMb: 28_800, hourlyRateCents: 100 });
    const custom = await create({ nodeId: node, customImage: "busybox" });
    // CPU-only: 2 cores and 4096 MB, the node's share per slot being more (32 / 8 cores, 115,200 / 8 MB); the GPU rate once.
    expect(custom.json.deployment).toMatchObject({ gpuCount: 0, cpuCores: 2, memoryMb: 4096, hourlyRateCents: 100 });
    const asked = await create({ nodeId: node, customImage: "busybox", gpuCount: 1, cpuCores: 1.5, memoryMb: 2048, diskGb: 7 });
    expect(asked.json.deployment).toMatchObject({ gpuCount: 1, cpuCores: 1.5, memoryMb: 2048, diskGb: 7 });
    // The agent caps the cores asked for; a default's (a template's minimum included) are the container's weight alone.
    const specOf = async (r: typeof tpl) => toSpec((await h.deps.repos.deployments.get(r.json.deployment.id))!, undefined);
    expect(await specOf(tpl)).toMatchObject({ cpuCores: 8, cpuLimit: "weight" });
    expect(await specOf(custom)).toMatchObject({ cpuCores: 2, cpuLimit: "weight" });
    expect(await specOf(asked)).toMatchObject({ cpuCores: 1.5 });
    expect(await specOf(asked)).not.toHaveProperty("cpuLimit");
    // On a node with many slots a CPU-only deployment gets its share per slot, so maxDeployments of them still fit.
    const crowded = (await h.onlineNode(op.token, { cpuCores: 2, ramMb: 1500, maxDeployments: 4 })).id;
    const small = await Promise.all(Array.from({ length: 4 }, () => create({ nodeId: crowded, customImage: "busybox" })));
    expect(small.map((r) => r.status)).toEqual([201, 201, 201, 201]);
    expect(small[0]!.json.deployment).toMatchObject({ gpuCount: 0, cpuCores: 0.5, memoryMb: 337 });
  });

  it("refuses what the node could never hold with 422 naming the resource, before anything is held", async () => {
    const node = await fourGpuNode();
    const tooMany = await create({ nodeId: node, customImage: "busybox", gpuCount: 5 });
    expect([tooMany.status, tooMany.json.error.code]).toEqual([422, "NODE_INSUFFICIENT_GPUS"]);
    const cpu = await create({ nodeId: node, customImage: "busybox", cpuCores: 33 });
    expect([cpu.status, cpu.json.error.code]).toEqual([422, "NODE_INSUFFICIENT_CPU"]);
    const ram = await create({ nodeId: node, customImage: "busybox", memoryMb: 115_201 });
    expect([ram.status, ram.json.error.code]).toEqual([422, "NODE_INSUFFICIENT_RAM"]);
    for (const body of [{ gpuCount: -1 }, { gpuCount: 1.5 }, { cpuCores: 0 }, { memoryMb: 10 }, { diskGb: 0 }]) {
      expect((await create({ nodeId: node, customImage: "busybox", ...body })).json.error.code).toBe("VALIDATION_ERROR");
    }
    expect(await held(node)).toEqual({ gpus: 0, cpuMillicores: 0, memoryMb: 0, slots: 0 });
  });

  it("refuses what the node has no room for now with 409 naming the short resource and what is free; deleting gives it back", async () => {
    const node = await fourGpuNode();
    const a = await create({ nodeId: node, customImage: "busybox", gpuCount: 3 });
    expect(a.status).toBe(201);
    const gpusShort = await create({ nodeId: node, customImage: "busybox", gpuCount: 2 });
    expect([gpusShort.status, gpusShort.json.error.code]).toEqual([409, "NODE_INSUFFICIENT_FREE_GPUS"]);
    expect(gpusShort.json.error.details).toEqual({ freeGpus: 1, freeCpuCores: 8, freeMemoryMb: 28_800, freeDiskGb: 2000 });
    const cpuShort = await create({ nodeId: node, customImage: "busybox", cpuCores: 9 });
    expect([cpuShort.status, cpuShort.json.error.code]).toEqual([409, "NODE_INSUFFICIENT_FREE_CPU"]);
    const ramShort = await create({ nodeId: node, customImage: "busybox", cpuCores: 1, memoryMb: 28_801 });
    expect([ramShort.status, ramShort.json.error.code]).toEqual([409, "NODE_INSUFFICIENT_FREE_RAM"]);
    expect(await held(node)).toEqual({ gpus: 3, cpuMillicores: 24_000, memoryMb: 86_400, slots: 1 });

    expect((await h.call("DELETE", `/deployments/${a.json.deployment.id}`, { token: tenant.token })).status).toBe(200);
    expect(await held(node)).toEqual({ gpus: 0, cpuMillicores: 0, memoryMb: 0, slots: 0 });
    expect((await create({ nodeId: node, customImage: "busybox", gpuCount: 4 })).status).toBe(201);
  });

  it("a stopped deployment gives its GPUs back, and starting it again needs them free", async () => {
    const node = await fourGpuNode();
    const a = (await create({ nodeId: node, customImage: "busybox", gpuCount: 2 })).json.deployment.id;
    // No agent is connected: the stop is done at once.
    expect((await h.call("POST", `/deployments/${a}/stop`, { token: tenant.token })).json.deployment.status).toBe("stopped");
    expect((await held(node)).gpus).toBe(0);
    const b = await create({ nodeId: node, customImage: "busybox", gpuCount: 3 });
    expect(b.status).toBe(201);
    const again = await h.call("POST", `/deployments/${a}/start`, { token: tenant.token });
    expect([again.status, again.json.error.code]).toEqual([409, "NODE_INSUFFICIENT_FREE_GPUS"]);
    expect(again.json.error.details).toEqual({ freeGpus: 1, freeCpuCores: 8, freeMemoryMb: 28_800, freeDiskGb: 2000 });
    await h.call("DELETE", `/deployments/${b.json.deployment.id}`, { token: tenant.token });
    expect((await h.call("POST", `/deployments/${a}/start`, { token: tenant.token })).status).toBe(200);
    expect((await held(node)).gpus).toBe(2);
  });

  it("never schedules a GPU twice under parallel creates: 8 one-GPU creates on a 4-GPU node, exactly 4 succeed", async () => {
    const node = await fourGpuNode();
    const results = await Promise.all(Array.from({ length: 8 }, () => create({ nodeId: node, customImage: "busybox", gpuCount: 1 })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(4);
    const refused = results.filter((r) => r.status !== 201);
    expect(refused.map((r) => r.json.error.code)).toEqual(Array(4).fill("NODE_INSUFFICIENT_FREE_GPUS"));
    expect(await held(node)).toEqual({ gpus: 4, cpuMillicores: 32_000, memoryMb: 115_200, slots: 4 });
  });

  it("the catalogue shows what is free and filters on minFreeGpus", async () => {
    const node = await fourGpuNode();
    const summary = async () => (await h.call("GET", "/nodes?limit=100")).json.nodes.find((n: { id: string }) => n.id === node);
    expect(await summary()).toMatchObject({ hourlyRateCents: 100, freeGpus: 4, freeCpuCores: 32, freeMemoryMb: 115_200 });
    const found = async (minFreeGpus: number) =>
      ((await h.call("GET", `/nodes?limit=100&minFreeGpus=${minFreeGpus}`)).json.nodes as Array<{ id: string }>).some((n) => n.id === node);
    expect(await found(4)).toBe(true);
    await create({ nodeId: node, customImage: "busybox", gpuCount: 3, cpuCores: 2.5, memoryMb: 1000 });
    expect(await summary()).toMatchObject({ freeGpus: 1, freeCpuCores: 29.5, freeMemoryMb: 114_200 });
    expect((await h.call("GET", `/nodes/${node}`)).json.node).toMatchObject({ freeGpus: 1 });
    expect(await found(1)).toBe(true);
    expect(await found(2)).toBe(false);
    expect((await h.call("GET", "/nodes?minFreeGpus=65")).json.error.code).toBe("VALIDATION_ERROR");
  });

  it("never schedules the same cores twice under parallel creates of mixed sizes", async () => {
    const node = (await h.onlineNode(op.token, { cpuCores: 10, ramMb: 100_000, maxDeployments: 64 })).id;
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => create({ nodeId: node, customImage: "busybox", cpuCores: i % 2 ? 1 : 2 })));
    const taken = results.filter((r) => r.status === 201).reduce((sum, r) => sum + r.json.deployment.cpuCores, 0);
    expect(taken).toBeLessThanOrEqual(10);
    expect(taken).toBeGreaterThanOrEqual(9);
    expect(results.filter((r) => r.status !== 201).every((r) => r.json.error.code === "NODE_INSUFFICIENT_FREE_CPU")).toBe(true);
    expect((await held(node)).cpuMillicores).toBe(taken * 1000);
  });
});
