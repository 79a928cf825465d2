// Price and placement before creating (issue 30): POST /deployments/estimate answers
// what create would do and holds nothing; without nodeId create picks the cheapest
// node that fits, and when none does says why, counted per reason.
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, beforeEach, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

const H100 = { name: "NVIDIA H100 80GB HBM3", vramMb: 81_559 };
const A100 = { name: "NVIDIA A100-PCIE-40GB", vramMb: 40_960 };
const times = <T>(n: number, g: T) => Array.from({ length: n }, () => g);

describeEachDatabase("estimate and placement on $name", (db) => {
  let h: Harness;
  let op: Awaited<ReturnType<Harness["signIn"]>>;
  let tenant: Awaited<ReturnType<Harness["signIn"]>>;

  beforeAll(async () => {
    h = await startHarness(db);
    op = await h.signIn();
    tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 100_000);
  });
  afterAll(() => h.close());
  // Placement looks at every online node: each test starts with only its own.
  beforeEach(() => h.takeAllNodesOffline());

  const create = (body: unknown, token = tenant.token) => h.call("POST", "/deployments", { token, body });
  const estimate = (body: unknown, token = tenant.token) => h.call("POST", "/deployments/estimate", { token, body });
  type NodeOptions = Parameters<Harness["onlineNode"]>[1];
  const node = async (o: NodeOptions) => (await h.onlineNode(op.token, { maxDeployments: 16, ...o })).id;
  const balance = async (token = tenant.token) => (await h.call("GET", "/credits/balance", { token })).json.balance;
  const held = async (nodeId: string) => {
    const n = (await h.deps.repos.nodes.get(nodeId))!;
    return { gpus: n.usedGpus, cpuMillicores: n.usedCpuMillicores, memoryMb: n.usedMemoryMb, slots: n.activeDeployments };
  };
  const deploymentCount = async () => (await h.call("GET", "/deployments", { token: tenant.token })).json.pagination.total;

  it("estimate answers the rate, the hold, what it would hold and that it fits, and creates and holds nothing", async () => {
    const id = await node({ gpus: times(4, H100), hourlyRateCents: 100 });
    const before = { balance: await balance(), node: await held(id), deployments: await deploymentCount() };
    const r = await estimate({ nodeId: id, customImage: "busybox", gpuCount: 2 });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      fits: true,
      refusal: null,
      nodeId: id,
      hourlyRateCents: 200,
      holdCredits: 200,
      gpuCount: 2,
      cpuCores: 16,
      memoryMb: 57_600,
      diskGb: null,
    });
    // Without a nodeId it names the node placement would pick.
    expect((await estimate({ customImage: "busybox", gpuCount: 2, diskGb: 5 })).json).toMatchObject({ fits: true, nodeId: id, diskGb: 5 });
    expect({ balance: await balance(), node: await held(id), deployments: await deploymentCount() }).toEqual(before);
    // What the estimate said is what create does.
    const made = await create({ nodeId: id, customImage: "busybox", gpuCount: 2 });
    expect(made.json.deployment).toMatchObject({ nodeId: id, hourlyRateCents: 200, gpuCount: 2, cpuCores: 16, memoryMb: 57_600 });
    expect((await balance()).reserved).toBe(before.balance.reserved + 200);
  });

  it("estimate answers the code create would answer when it does not fit, with its details", async () => {
    const id = await node({ gpus: times(4, H100), hourlyRateCents: 100 });
    expect((await create({ nodeId: id, customImage: "busybox", gpuCount: 3 })).status).toBe(201);
    const before = await held(id);
    const r = await estimate({ nodeId: id, customImage: "busybox", gpuCount: 2 });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ fits: false, nodeId: id, hourlyRateCents: 200, holdCredits: 200, gpuCount: 2 });
    expect(r.json.refusal).toMatchObject({ code: "NODE_INSUFFICIENT_FREE_GPUS", details: { freeGpus: 1 } });
    const refused = await create({ nodeId: id, customImage: "busybox", gpuCount: 2 });
    expect([refused.status, refused.json.error.code, refused.json.error.details.freeGpus]).toEqual([409, "NODE_INSUFFICIENT_FREE_GPUS", 1]);
    // More GPUs than the node has at all, and too few credits: create's codes too.
    expect((await estimate({ nodeId: id, customImage: "busybox", gpuCount: 5 })).json).toMatchObject({
      fits: false,
      nodeId: id,
      hourlyRateCents: null,
      refusal: { code: "NODE_INSUFFICIENT_GPUS" },
    });
    const poor = await h.signIn();
    await h.grantCredits(poor.user.id, 99);
    expect((await estimate({ nodeId: id, customImage: "busybox", gpuCount: 1 }, poor.token)).json).toMatchObject({
      fits: false,
      hourlyRateCents: 100,
      refusal: { code: "INSUFFICIENT_CREDITS", details: { requiredCredits: 100, availableCredits: 99 } },
    });
    expect(await held(id)).toEqual(before);
    // A request wrong whatever the nodes is an error, as at create.
    expect((await estimate({ nodeId: "node_nope", customImage: "busybox" })).json.error.code).toBe("NODE_NOT_FOUND");
    expect((await estimate({ nodeId: id })).json.error.code).toBe("TEMPLATE_OR_IMAGE_REQUIRED");
    expect((await estimate({ customImage: "busybox", gpuCount: -1 })).json.error.code).toBe("VALIDATION_ERROR");
  });

  it("without nodeId creates on the cheapest node that fits; of equal rates the one with most free GPUs", async () => {
    await node({ gpus: times(4, H100), hourlyRateCents: 300 }); // fits, dearer
    const fewFree = await node({ gpus: times(2, H100), hourlyRateCents: 100 }); // cheap, 1 of 2 GPUs free
    expect((await create({ nodeId: fewFree, customImage: "busybox", gpuCount: 1 })).status).toBe(201);
    await node({ gpus: times(8, H100), hourlyRateCents: 100, region: "us-east" }); // cheap, elsewhere
    await node({ gpus: times(8, A100), hourlyRateCents: 50 }); // cheapest, another model
    const four = await node({ gpus: times(4, H100), hourlyRateCents: 100 });
    const eight = await node({ gpus: times(8, H100), hourlyRateCents: 100 });
    const body = { customImage: "busybox", gpuCount: 2, gpuModel: "h100", region: "eu-west" };
    expect((await estimate(body)).json).toMatchObject({ fits: true, nodeId: eight, hourlyRateCents: 200 });
    const r = await create(body);
    expect(r.status).toBe(201);
    expect(r.json).toMatchObject({ estimatedHourlyCost: 200, deployment: { nodeId: eight, gpuCount: 2, hourlyRateCents: 200 } });
    expect((await held(eight)).gpus).toBe(2);
    // 6 free on the 8-GPU node still beat 4 on the other at the same rate.
    expect((await create(body)).json.deployment.nodeId).toBe(eight);
    // 5 GPUs: only the 8-GPU node has as many, and 4 of them are free; nothing was created.
    expect((await create({ ...body, gpuCount: 5 })).json.error.details).toEqual({
      online: 6,
      reasons: { NODE_INSUFFICIENT_GPUS: 3, NODE_INSUFFICIENT_FREE_GPUS: 1, gpuModel: 1, region: 1 },
    });
    expect((await held(four)).gpus).toBe(0);
  });

  it("when no node fits answers NO_NODE_FITS counting the online nodes per reason, and holds nothing", async () => {
    await node({ gpus: times(4, H100), hourlyRateCents: 100, region: "us-east" }); // another region
    await node({ gpus: times(4, H100), hourlyRateCents: 200 }); // over the rate
    await node({ gpus: times(4, A100), hourlyRateCents: 100 }); // GPUs too small
    await node({ gpus: times(2, A100), hourlyRateCents: 100 }); // GPUs too small
    const busy = await node({ gpus: times(2, H100), hourlyRateCents: 100 }); // 1 of 2 GPUs free
    expect((await create({ nodeId: busy, customImage: "busybox", gpuCount: 1 })).status).toBe(201);
    const before = await balance();
    const body = { customImage: "busybox", gpuCount: 2, minGpuVram: 80_000, region: "eu-west", maxHourlyRate: 150 };
    const r = await create(body);
    expect([r.status, r.json.error.code]).toEqual([409, "NO_NODE_FITS"]);
    expect(r.json.error.details).toEqual({
      online: 5,
      reasons: { minGpuVram: 2, region: 1, maxHourlyRate: 1, NODE_INSUFFICIENT_FREE_GPUS: 1 },
    });
    expect(r.json.error.message).toBe(
      "no node fits: 5 nodes online: 2 lack a GPU with 80000 MB, 1 lacks 2 free GPUs, 1 is over your maximum rate, 1 is in another region",
    );
    const e = await estimate(body);
    expect(e.json).toMatchObject({ fits: false, nodeId: null, hourlyRateCents: null, holdCredits: null });
    expect(e.json.refusal).toEqual({ code: "NO_NODE_FITS", message: r.json.error.message, details: r.json.error.details });
    expect(await balance()).toEqual(before);
    // With nodeId, a requirement that node misses is counted the same way.
    const named = await create({ ...body, nodeId: busy, minGpuVram: undefined, region: "us-east" });
    expect([named.status, named.json.error.details]).toEqual([409, { online: 1, reasons: { region: 1 } }]);
  });

  it("parallel creates without nodeId never take the same GPU: a lost race tries the next node", async () => {
    const a = await node({ gpus: [H100], hourlyRateCents: 100 });
    const b = await node({ gpus: [H100], hourlyRateCents: 150 });
    const answers = await Promise.all(times(3, 0).map(() => create({ customImage: "busybox", gpuCount: 1 })));
    expect(answers.map((r) => r.status).sort()).toEqual([201, 201, 409]);
    expect(answers.flatMap((r) => (r.status === 201 ? [r.json.deployment.nodeId] : [])).sort()).toEqual([a, b].sort());
    expect(answers.find((r) => r.status === 409)!.json.error.code).toBe("NO_NODE_FITS");
    expect([(await held(a)).gpus, (await held(b)).gpus]).toEqual([1, 1]);
  });
});
