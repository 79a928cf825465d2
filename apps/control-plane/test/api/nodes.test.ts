import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

describeEachDatabase("nodes on $name", (db) => {
  let h: Harness;
  let op: Awaited<ReturnType<Harness["signIn"]>>;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    h = await startHarness(db);
    op = await h.signIn();
    ids.h100 = (await h.onlineNode(op.token, { gpus: [{ name: "NVIDIA H100 80GB HBM3", vramMb: 81559 }], hourlyRateCents: 250, region: "us-east" })).id;
    h.clock.advance(1000);
    ids.rtx = (
      await h.onlineNode(op.token, {
        gpus: [
          { name: "NVIDIA GeForce RTX 4090", vramMb: 24564 },
          { name: "NVIDIA GeForce RTX 4090", vramMb: 24564 },
        ],
        hourlyRateCents: 70,
        cpuCores: 16,
        ramMb: 64_000,
      })
    ).id;
    h.clock.advance(1000);
    ids.cpu = (await h.onlineNode(op.token, { cpuCores: 8, ramMb: 16_000, hourlyRateCents: 5, region: "asia-east" })).id;
    h.clock.advance(1000);
    const off = await h.call("POST", "/operator/nodes", {
      token: op.token,
      body: { name: "cold", region: "eu-central", country: "PL", hourlyRateCents: 10, maxDeployments: 1 },
    });
    ids.off = off.json.node.id;
  });
  afterAll(() => h.close());

  it("registers a node: 201, the agent token once, offline, and the caller becomes an operator", async () => {
    const fresh = await h.signIn();
    const r = await h.call("POST", "/operator/nodes", {
      token: fresh.token,
      body: { name: "rig-1", region: "eu-west", country: "FR", hourlyRateCents: 40, maxDeployments: 2 },
    });
    expect(r.status).toBe(201);
    expect(r.json.agentToken).toMatch(/^cmn_/);
    expect(r.json.node).toMatchObject({
      name: "rig-1",
      status: "offline",
      region: "eu-west",
      country: "FR",
      hourlyRateCents: 40,
      maxDeployments: 2,
      activeDeployments: 0,
      operatorId: fresh.user.id,
      lastHeartbeat: null,
      gpus: [],
    });
    expect((await h.call("GET", "/auth/me", { token: fresh.token })).json.user.isOperator).toBe(true);
    // Stored hashed: the token is nowhere in the database row.
    const row = await h.deps.repos.nodes.get(r.json.node.id);
    expect(JSON.stringify(row)).not.toContain(r.json.agentToken);
    const mine = await h.call("GET", "/operator/nodes", { token: fresh.token });
    expect(mine.json.nodes.map((n: { id: string }) => n.id)).toEqual([r.json.node.id]);
  });

  it("lists newest first with the summary fields and a pagination object", async () => {
    const r = await h.call("GET", "/nodes?limit=3");
    expect(r.status).toBe(200);
    expect(r.json.pagination.page).toBe(1);
    expect(r.json.pagination.limit).toBe(3);
    expect(r.json.pagination.total).toBeGreaterThanOrEqual(4);
    expect(r.json.nodes).toHaveLength(3);
    const n =
      r.json.nodes.find((x: { id: string }) => x.id === ids.h100) ??
      (await h.call("GET", "/nodes?limit=100")).json.nodes.find((x: { id: string }) => x.id === ids.h100);
    expect(Object.keys(n).sort()).toEqual(
      [
        "activeDeployments",
        "country",
        "egressPolicy",
        "freeCpuCores",
        "freeDiskGb",
        "freeGpus",
        "freeMemoryMb",
        "gpus",
        "hourlyRateCents",
        "id",
        "maintenanceReason",
        "maxDeployments",
        "name",
        "region",
        "specs",
        "status",
        "uptimePercent",
      ].sort(),
    );
    // No agent has said anything of this node's firewall (agents/egress-policy.test.ts has them say it).
    expect(n.egressPolicy).toBeNull();
    expect(n.gpus[0]).toEqual({ name: "NVIDIA H100 80GB HBM3", vramMb: 81559, computeVersion: "9.0" });
    expect(Object.keys(n.specs).sort()).toEqual(["cpuCores", "cpuModel", "cpuThreads", "diskGb", "diskType", "ramMb"]);
  });

  const only = async (q: string) => (await h.call("GET", `/nodes?limit=100&${q}`)).json.nodes.map((n: { id: string }) => n.id).sort();

  it("applies every filter", async () => {
    expect(await only("status=offline")).toContain(ids.off);
    expect(await only("status=online")).not.toContain(ids.off);
    expect(await only("hasGpu=true")).toEqual([ids.h100, ids.rtx].sort());
    expect(await only("hasGpu=false")).not.toContain(ids.rtx);
    expect(await only("minGpuVram=40000")).toEqual([ids.h100]);
    expect(await only("minGpuVram=24000")).toEqual([ids.h100, ids.rtx].sort());
    expect(await only("minCpuCores=17")).toEqual([ids.h100]);
    expect(await only("minRamMb=60000")).toEqual([ids.h100, ids.rtx].sort());
    expect(await only("region=asia-east")).toEqual([ids.cpu]);
    expect(await only("maxHourlyRate=70&status=online")).toEqual([ids.rtx, ids.cpu].sort());
    expect(await only("hasGpu=true&maxHourlyRate=100&region=eu-west")).toEqual([ids.rtx]);
    // Nodes whose agent never said its egress policy are not "enforced" ones.
    expect(await only("egressPolicy=enforced")).toEqual([]);
    const bad = await h.call("GET", "/nodes?egressPolicy=strict");
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ code: "VALIDATION_ERROR", details: [{ field: "egressPolicy" }] });
  });

  it("pages: defaults 1/20, past the end is empty, limit capped at 100", async () => {
    const d = await h.call("GET", "/nodes");
    expect(d.json.pagination).toMatchObject({ page: 1, limit: 20 });
    const total = d.json.pagination.total;
    const p2 = await h.call("GET", "/nodes?limit=2&page=2");
    expect(p2.json.nodes).toHaveLength(Math.min(2, total - 2));
    expect(p2.json.pagination.totalPages).toBe(Math.ceil(total / 2));
    const beyond = await h.call("GET", "/nodes?page=99");
    expect(beyond.status).toBe(200);
    expect(beyond.json.nodes).toEqual([]);
    const tooMany = await h.call("GET", "/nodes?limit=101");
    expect(tooMany.status).toBe(400);
    expect(tooMany.json.error).toMatchObject({ code: "VALIDATION_ERROR", details: [{ field: "limit" }] });
    const all = [...(await h.call("GET", "/nodes?limit=2&page=1")).json.nodes, ...p2.json.nodes].map((n: { id: string }) => n.id);
    expect(new Set(all).size).toBe(all.length);
  });

  it("shows a node's detail fields, and 404 for an unknown one", async () => {
    const r = await h.call("GET", `/nodes/${ids.h100}`);
    expect(r.status).toBe(200);
    expect(r.json.node.operatorId).toBe(op.user.id);
    expect(r.json.node.lastHeartbeat).toBe(new Date(h.clock.now() - 3000).toISOString());
    expect(r.json.node.specs).toMatchObject({ networkSpeedMbps: 10_000, os: "Ubuntu 22.04", containerVersion: "27.0.3" });
    expect(r.json.node.gpus[0]).toMatchObject({ brand: "NVIDIA", computeCores: 16896, tensorCores: 528, driverVersion: "550.54.15" });
    // Uptime is counted from heartbeats (agents/node-controls.test.ts): none has come since it was brought online.
    expect(r.json.node).toMatchObject({ uptimePercent: 0, uptime: { last24h: 0, last7d: 0, last30d: 0 }, maintenanceReason: null, maintenanceSince: null });
    const missing = await h.call("GET", "/nodes/node_nope");
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe("NODE_NOT_FOUND");
  });

  it("retires only the caller's own nodes", async () => {
    const other = await h.signIn();
    const r = await h.call("DELETE", `/operator/nodes/${ids.off}`, { token: other.token });
    expect(r.status).toBe(404);
    const ok = await h.call("DELETE", `/operator/nodes/${ids.off}`, { token: op.token });
    expect(ok.status).toBe(200);
    expect(ok.json.success).toBe(true);
    expect((await h.call("GET", `/nodes/${ids.off}`)).status).toBe(404);
    expect(await only("")).not.toContain(ids.off);
    // Still on its operator's records, when asked for.
    const mine = async (query: string) =>
      (await h.call("GET", `/operator/nodes${query}`, { token: op.token })).json.nodes as Array<{ id: string; retiredAt: string | null }>;
    expect((await mine("")).map((n) => n.id)).not.toContain(ids.off);
    const all = await mine("?all=true");
    expect(all.find((n) => n.id === ids.off)?.retiredAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(all.filter((n) => n.id !== ids.off).every((n) => n.retiredAt === null)).toBe(true);
  });
});

describeEachDatabase("node quotas on $name", (db) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(db, { config: { MAX_NODES_PER_ACCOUNT: 3, NODE_REGISTRATIONS_PER_HOUR: 7 } });
  });
  afterAll(() => h.close());

  const register = (token: string, name = "rig") =>
    h.call("POST", "/operator/nodes", { token, body: { name, region: "eu-west", country: "DE", hourlyRateCents: 10, maxDeployments: 1 } });

  it("holds an account to MAX_NODES_PER_ACCOUNT, even when its registrations race, and counts no retired node", async () => {
    const op = await h.signIn();
    const raced = await Promise.all(Array.from({ length: 5 }, (_, i) => register(op.token, `rig-${i}`)));
    expect(raced.map((r) => r.status).sort()).toEqual([201, 201, 201, 403, 403]);
    const refused = raced.find((r) => r.status === 403)!;
    expect(refused.json.error.code).toBe("NODE_QUOTA_EXCEEDED");
    expect(refused.json.error.message).toContain("retire one");
    const mine = (await h.call("GET", "/operator/nodes", { token: op.token })).json.nodes;
    expect(mine).toHaveLength(3);
    // Another account has a quota of its own.
    expect((await register((await h.signIn()).token)).status).toBe(201);
    // A retired node frees its place.
    expect((await h.call("DELETE", `/operator/nodes/${mine[0].id}`, { token: op.token })).status).toBe(200);
    expect((await register(op.token)).status).toBe(201);
    expect((await register(op.token)).status).toBe(403);
  });

  it("limits registrations per account and hour with 429 and Retry-After", async () => {
    const op = await h.signIn();
    const codes: number[] = [];
    for (let i = 0; i < 8; i++) {
      const r = await register(op.token);
      codes.push(r.status);
      if (r.status === 201) await h.call("DELETE", `/operator/nodes/${r.json.node.id}`, { token: op.token });
      else if (r.status === 429) {
        expect(r.json.error.code).toBe("RATE_LIMITED");
        expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
      }
    }
    expect(codes).toEqual([201, 201, 201, 201, 201, 201, 201, 429]);
    h.clock.advance(3_600_000);
    // Same account, signed in afresh (its access token expired meanwhile): a new window.
    const again = await h.signIn(op.wallet);
    expect(again.user.id).toBe(op.user.id);
    expect((await register(again.token)).status).toBe(201);
  });
});
