// Disk counted against the node as GPUs, cores and memory are: a deployment's
// disk allowance (diskGb, else its template's minDiskGb, else the node's
// default for a custom image) is held of the node's disk while it is live.
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

describeEachDatabase("disk held of the node on $name", (db) => {
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

  const create = (body: unknown) => h.call("POST", "/deployments", { token: tenant.token, body });
  /** A CPU-only node of 100 GB of disk with room for many deployments otherwise. */
  const diskNode = async (o: { diskGb?: number; diskDefaultGb?: number } = {}) =>
    (await h.onlineNode(op.token, { diskGb: o.diskGb ?? 100, maxDeployments: 64, cpuCores: 64, ramMb: 1_000_000, ...o })).id;
  const usedDiskGb = async (nodeId: string) => (await h.deps.repos.nodes.get(nodeId))!.usedDiskGb;
  const freeDiskGb = async (nodeId: string) => (await h.call("GET", `/nodes/${nodeId}`)).json.node.freeDiskGb as number;
  const small = { customImage: "busybox", cpuCores: 0.5, memoryMb: 256 };

  it("holds the allowance asked for, the template's or the node's default, shows what is free, and gives it back", async () => {
    const node = await diskNode({ diskDefaultGb: 20 });
    expect(await freeDiskGb(node)).toBe(100);
    const asked = await create({ nodeId: node, ...small, diskGb: 30 });
    expect(asked.status).toBe(201);
    // ubuntu's minDiskGb is 2.
    const templated = await create({ nodeId: node, templateId: "tpl_ubuntu", cpuCores: 0.5, memoryMb: 256 });
    expect(templated.json.deployment.diskGb).toBe(2);
    const custom = await create({ nodeId: node, ...small });
    expect(custom.json.deployment.diskGb).toBe(20);
    expect(await usedDiskGb(node)).toBe(52);
    expect(await freeDiskGb(node)).toBe(48);
    expect((await h.call("GET", "/nodes?limit=100")).json.nodes.find((n: { id: string }) => n.id === node).freeDiskGb).toBe(48);

    // Stopped (no agent: at once), then deleted: each gives its disk back once.
    expect((await h.call("POST", `/deployments/${asked.json.deployment.id}/stop`, { token: tenant.token })).json.deployment.status).toBe("stopped");
    expect(await usedDiskGb(node)).toBe(22);
    await h.call("DELETE", `/deployments/${asked.json.deployment.id}`, { token: tenant.token });
    await h.call("DELETE", `/deployments/${custom.json.deployment.id}`, { token: tenant.token });
    expect(await usedDiskGb(node)).toBe(2);
  });

  it("refuses an allowance larger than the node's disk with 422 NODE_INSUFFICIENT_DISK, before anything is held", async () => {
    const node = await diskNode();
    const r = await create({ nodeId: node, ...small, diskGb: 101 });
    expect([r.status, r.json.error.code]).toEqual([422, "NODE_INSUFFICIENT_DISK"]);
    expect(r.json.error.details).toEqual({ diskGb: 100 });
    expect(await usedDiskGb(node)).toBe(0);
  });

  it("refuses what the disk has no room for now with 409 NODE_INSUFFICIENT_FREE_DISK and what is free; starting again needs it free", async () => {
    const node = await diskNode();
    const a = await create({ nodeId: node, ...small, diskGb: 60 });
    expect(a.status).toBe(201);
    const short = await create({ nodeId: node, ...small, diskGb: 41 });
    expect([short.status, short.json.error.code]).toEqual([409, "NODE_INSUFFICIENT_FREE_DISK"]);
    expect(short.json.error.details).toMatchObject({ freeDiskGb: 40 });
    expect(short.json.error.message).toContain("disk");

    await h.call("POST", `/deployments/${a.json.deployment.id}/stop`, { token: tenant.token });
    expect((await create({ nodeId: node, ...small, diskGb: 50 })).status).toBe(201);
    const again = await h.call("POST", `/deployments/${a.json.deployment.id}/start`, { token: tenant.token });
    expect([again.status, again.json.error.code]).toEqual([409, "NODE_INSUFFICIENT_FREE_DISK"]);
    expect(again.json.error.details).toMatchObject({ freeDiskGb: 50 });
  });

  it("estimate and placement count the disk: the reason is named and counted", async () => {
    const node = await diskNode({ diskGb: 10 });
    const est = await h.call("POST", "/deployments/estimate", { token: tenant.token, body: { nodeId: node, ...small, diskGb: 8 } });
    expect(est.json).toMatchObject({ fits: true, diskGb: 8 });
    expect((await create({ nodeId: node, ...small, diskGb: 8 })).status).toBe(201);
    const full = await h.call("POST", "/deployments/estimate", { token: tenant.token, body: { nodeId: node, ...small, diskGb: 5 } });
    expect(full.json).toMatchObject({ fits: false, refusal: { code: "NODE_INSUFFICIENT_FREE_DISK", details: { freeDiskGb: 2 } } });
    // Placement: a disk larger than any node's is asked for; every node says why.
    const placed = await create({ ...small, diskGb: 9_000_000 });
    expect([placed.status, placed.json.error.code]).toEqual([409, "NO_NODE_FITS"]);
    expect(placed.json.error.details.reasons.NODE_INSUFFICIENT_DISK).toBeGreaterThanOrEqual(1);
    expect(placed.json.error.message).toMatch(/ha(s|ve) a smaller disk than it needs/);
  });

  it("never holds the same disk twice under parallel creates: 10 creates of 30 GB on 100 GB, exactly 3 succeed", async () => {
    const node = await diskNode();
    const results = await Promise.all(Array.from({ length: 10 }, () => create({ nodeId: node, ...small, diskGb: 30 })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(3);
    expect(results.filter((r) => r.status !== 201).map((r) => r.json.error.code)).toEqual(Array(7).fill("NODE_INSUFFICIENT_FREE_DISK"));
    expect(await usedDiskGb(node)).toBe(90);
  });

  it("a node that has not said its disk's size is not counted against", async () => {
    const node = await diskNode({ diskGb: 0 });
    const r = await create({ nodeId: node, ...small, diskGb: 500 });
    expect(r.status).toBe(201);
    expect(await freeDiskGb(node)).toBe(0);
  });
});
