// Node controls for operators (issue 28, part 2): PATCH a node, maintenance,
// what runs on a node, uptime from heartbeats, and online only with specs.
// Through the API on a real socket with simulated agents, on both databases.
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, beforeEach, expect, it } from "vitest";
import { type AgentHarness, eventually, startAgentHarness } from "./support/agent-harness";
import { SimAgent, SPECS } from "./support/sim-agent";

const S = 1000;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describeEachDatabase("node controls on $name", (db) => {
  let h: AgentHarness;
  let op: Awaited<ReturnType<AgentHarness["signIn"]>>;
  let tenant: Awaited<ReturnType<AgentHarness["signIn"]>>;

  beforeAll(async () => {
    h = await startAgentHarness(db);
    op = await h.signIn();
    tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 100_000);
  });
  afterAll(() => h.close());
  // Placement looks at every online node: each test starts with only its own.
  beforeEach(() => h.takeAllNodesOffline());

  const node = async (id: string) => (await h.call("GET", `/nodes/${id}`)).json.node;
  const patch = (id: string, body: unknown, token = op.token) => h.call("PATCH", `/operator/nodes/${id}`, { token, body });
  const maintenance = (id: string, body: unknown, token = op.token) => h.call("POST", `/operator/nodes/${id}/maintenance`, { token, body });
  const create = (body: Record<string, unknown>) => h.call("POST", "/deployments", { token: tenant.token, body: { customImage: "busybox:1.36", ...body } });
  /** A heartbeat the control plane has read and written (the batch flushed). */
  async function beat(agent: SimAgent, nodeId: string) {
    await h.beat(agent, nodeId);
    await h.deps.agents.heartbeats.flush();
  }

  it("PATCH changes the node; a new rate applies to deployments created after it, and a lower maxDeployments stops nothing", async () => {
    const n = await h.connectedNode(op.token, { hourlyRateCents: 50, maxDeployments: 8 });
    const first = await h.deploy(tenant.token, n.id, n.agent);
    await h.run(n.agent, first.spec, tenant.token);

    const r = await patch(n.id, { name: "gpu-box-2", hourlyRateCents: 80, maxDeployments: 1, region: "us-east", country: "US" });
    expect(r.status).toBe(200);
    expect(r.json.node).toMatchObject({
      id: n.id,
      name: "gpu-box-2",
      hourlyRateCents: 80,
      maxDeployments: 1,
      region: "us-east",
      country: "US",
      retiredAt: null,
    });
    expect(await node(n.id)).toMatchObject({ name: "gpu-box-2", hourlyRateCents: 80, region: "us-east", status: "online", activeDeployments: 1 });
    // The running one keeps its rate and keeps running; nothing was sent to stop it.
    expect(await h.getDeployment(first.id, tenant.token)).toMatchObject({ status: "running", hourlyRateCents: 50 });
    expect(n.agent.pending().filter((f) => f.type === "command")).toEqual([]);
    expect((await create({ nodeId: n.id })).json.error.code).toBe("NODE_AT_CAPACITY");

    expect((await patch(n.id, { maxDeployments: 2 })).status).toBe(200);
    const second = await create({ nodeId: n.id });
    expect(second.status).toBe(201);
    expect(second.json.deployment.hourlyRateCents).toBe(80);
    expect((await h.getDeployment(first.id, tenant.token)).hourlyRateCents).toBe(50);
    await n.agent.close();
  });

  it("PATCH validates as registration does and answers 404 for a node that is not yours", async () => {
    const n = await h.registerNode(op.token);
    for (const [body, field] of [
      [{ country: "Germany" }, "country"],
      [{ region: "mars" }, "region"],
      [{ hourlyRateCents: -1 }, "hourlyRateCents"],
      [{ maxDeployments: 0 }, "maxDeployments"],
      [{ name: " " }, "name"],
      [{ agentTokenHash: "x" }, undefined],
    ] as const) {
      const r = await patch(n.id, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.error.code).toBe("VALIDATION_ERROR");
      if (field) expect(r.json.error.details).toContainEqual(expect.objectContaining({ field }));
    }
    // Nothing given, nothing changed, as a JSON merge patch of {}.
    const empty = await patch(n.id, {});
    expect(empty.status).toBe(200);
    expect(empty.json.node).toMatchObject({ name: "gpu-box", hourlyRateCents: 50, maxDeployments: 8 });
    expect((await patch(n.id, { name: "x" }, tenant.token)).json.error.code).toBe("NODE_NOT_FOUND");
    expect((await patch("node_nope", { name: "x" })).status).toBe(404);
    expect((await maintenance(n.id, { enabled: true }, tenant.token)).status).toBe(404);
    expect((await h.call("GET", `/operator/nodes/${n.id}/deployments`, { token: tenant.token })).status).toBe(404);
    expect((await node(n.id)).name).toBe("gpu-box");
  });

  it("maintenance refuses new deployments with the reason, keeps the running one running and billed, and survives heartbeats and reconnects", async () => {
    const n = await h.connectedNode(op.token, { hourlyRateCents: 60 });
    const running = await h.deploy(tenant.token, n.id, n.agent);
    await h.run(n.agent, running.spec, tenant.token);

    const on = await maintenance(n.id, { enabled: true, reason: "replacing a fan" });
    expect(on.status).toBe(200);
    expect(on.json.node).toMatchObject({
      status: "maintenance",
      maintenanceReason: "replacing a fan",
      maintenanceSince: new Date(h.clock.now()).toISOString(),
    });
    // Tenants see it, and why.
    expect(await node(n.id)).toMatchObject({ status: "maintenance", maintenanceReason: "replacing a fan" });
    const listed = async (status: string) => (await h.call("GET", `/nodes?status=${status}&limit=100`)).json.nodes.map((x: { id: string }) => x.id);
    expect(await listed("maintenance")).toContain(n.id);
    expect(await listed("online")).not.toContain(n.id);

    const direct = await create({ nodeId: n.id });
    expect(direct.status).toBe(409);
    expect(direct.json.error.code).toBe("NODE_IN_MAINTENANCE");
    expect(direct.json.error.message).toContain("replacing a fan");
    expect(direct.json.error.details).toMatchObject({ maintenanceReason: "replacing a fan" });
    const placed = await create({});
    expect(placed.json.error.code).toBe("NO_NODE_FITS");
    expect(placed.json.error.details).toEqual({ online: 1, reasons: { NODE_IN_MAINTENANCE: 1 } });
    expect(placed.json.error.message).toContain("1 node online: 1 is in maintenance");
    const estimate = await h.call("POST", "/deployments/estimate", { token: tenant.token, body: { nodeId: n.id, customImage: "busybox:1.36" } });
    expect(estimate.json.refusal.code).toBe("NODE_IN_MAINTENANCE");

    // Heartbeats, the monitor and the meter leave it in maintenance, running and billed.
    h.clock.advance(60 * S);
    await beat(n.agent, n.id);
    await h.deps.agents.tick();
    await h.deps.metering.tick();
    expect(await node(n.id)).toMatchObject({ status: "maintenance" });
    expect(await h.getDeployment(running.id, tenant.token)).toMatchObject({ status: "running", totalCost: 1 });
    // So does a reconnect: the hello and the specs of the agent's next session.
    await n.agent.close();
    const back = await SimAgent.connect(h.url, n.agentToken);
    await eventually(() => expect(h.deps.agents.isConnected(n.id)).toBe(true));
    await beat(back.agent, n.id);
    expect(await node(n.id)).toMatchObject({ status: "maintenance", maintenanceReason: "replacing a fan" });
    expect((await create({ nodeId: n.id })).json.error.code).toBe("NODE_IN_MAINTENANCE");

    // Off: online again, as its heartbeats say, and taking deployments.
    const off = await maintenance(n.id, { enabled: false });
    expect(off.json.node).toMatchObject({ status: "online", maintenanceReason: null, maintenanceSince: null });
    expect((await create({ nodeId: n.id })).status).toBe(201);

    // In maintenance while its agent is away: shown in maintenance, and offline once taken out.
    expect((await maintenance(n.id, { enabled: true })).json.node.maintenanceReason).toBe("maintenance by its operator");
    await back.agent.close();
    h.clock.advance(31 * S);
    await h.deps.agents.tick();
    expect((await node(n.id)).status).toBe("maintenance");
    expect((await maintenance(n.id, { enabled: false })).json.node.status).toBe("offline");
    expect((await maintenance(n.id, { enabled: true, reason: "a\u0007b" })).status).toBe(400);
  });

  it("maintenance refuses to start a deployment there again, with the reason", async () => {
    const n = await h.connectedNode(op.token);
    const d = await h.deploy(tenant.token, n.id, n.agent);
    n.agent.report(d.spec, "failed", { reason: "the command exited 1" });
    await eventually(async () => expect((await h.getDeployment(d.id, tenant.token)).status).toBe("failed"));
    await maintenance(n.id, { enabled: true, reason: "driver upgrade" });
    const start = await h.call("POST", `/deployments/${d.id}/start`, { token: tenant.token });
    expect(start.status).toBe(409);
    expect(start.json.error).toMatchObject({ code: "NODE_IN_MAINTENANCE", message: expect.stringContaining("driver upgrade") });
    expect((await h.getDeployment(d.id, tenant.token)).status).toBe("failed");
    await maintenance(n.id, { enabled: false });
    expect((await h.call("POST", `/deployments/${d.id}/start`, { token: tenant.token })).status).toBe(200);
    await n.agent.close();
  });

  it("lists what runs on the node with its rate and earnings, never the tenant's env, a page at a time", async () => {
    const n = await h.connectedNode(op.token, { hourlyRateCents: 120 });
    const first = await h.deploy(tenant.token, n.id, n.agent, { env: { API_KEY: "hunter2-secret" }, ports: [8080] });
    await h.run(n.agent, first.spec, tenant.token);
    h.clock.advance(60 * S);
    await beat(n.agent, n.id);
    await h.deps.metering.tick();
    const second = await create({ nodeId: n.id });
    expect(second.status).toBe(201);

    const r = await h.call("GET", `/operator/nodes/${n.id}/deployments`, { token: op.token });
    expect(r.status).toBe(200);
    expect(r.text).not.toContain("hunter2-secret");
    expect(r.text).not.toContain("API_KEY");
    expect(r.json.pagination).toEqual({ page: 1, limit: 20, total: 2, totalPages: 1 });
    expect(r.json.deployments.map((d: { id: string }) => d.id)).toEqual([second.json.deployment.id, first.id]);
    const [, ran] = r.json.deployments;
    const earnings = (await h.call("GET", "/operator/earnings", { token: op.token })).json.earnings;
    const earned = earnings.byNode.find((x: { nodeId: string }) => x.nodeId === n.id).earned;
    expect(earned).toBeGreaterThan(0);
    expect(ran).toEqual({
      id: first.id,
      status: "running",
      image: "busybox:1.36",
      ports: [8080],
      tcpPorts: [],
      gpuCount: 0,
      cpuCores: expect.any(Number),
      memoryMb: expect.any(Number),
      hourlyRateCents: 120,
      earned,
      createdAt: expect.any(String),
      startedAt: expect.any(String),
      stoppedAt: null,
    });
    expect(r.json.deployments[0]).toMatchObject({ status: "pending", earned: 0, startedAt: null });

    const page2 = await h.call("GET", `/operator/nodes/${n.id}/deployments?limit=1&page=2`, { token: op.token });
    expect(page2.json.deployments.map((d: { id: string }) => d.id)).toEqual([first.id]);
    expect(page2.json.pagination).toEqual({ page: 2, limit: 1, total: 2, totalPages: 2 });
    const onlyRunning = await h.call("GET", `/operator/nodes/${n.id}/deployments?status=running`, { token: op.token });
    expect(onlyRunning.json.deployments.map((d: { id: string }) => d.id)).toEqual([first.id]);
    expect((await h.call("GET", `/operator/nodes/${n.id}/deployments?limit=101`, { token: op.token })).status).toBe(400);
    await n.agent.close();
  });

  it("a node whose agent said hello but no specs yet is not online nor listed online; its specs bring it online", async () => {
    const n = await h.registerNode(op.token);
    const { agent } = await SimAgent.connect(h.url, n.agentToken, { specs: false });
    await eventually(() => expect(h.deps.agents.isConnected(n.id)).toBe(true));
    await beat(agent, n.id);
    expect(await node(n.id)).toMatchObject({ status: "offline", specs: { cpuCores: 0, ramMb: 0 } });
    const online = (await h.call("GET", "/nodes?status=online&limit=100")).json.nodes;
    expect(online.map((x: { id: string }) => x.id)).not.toContain(n.id);
    for (const x of online) expect(x.specs.cpuCores > 0 && x.specs.ramMb > 0).toBe(true);
    expect((await create({ nodeId: n.id })).json.error.code).toBe("NODE_OFFLINE");

    agent.send({ type: "specs", specs: SPECS, gpus: [] });
    await eventually(async () => expect(await node(n.id)).toMatchObject({ status: "online", specs: { cpuCores: SPECS.cpuCores } }));
    // Specs that lose the cores take it offline again.
    agent.send({ type: "specs", specs: { ...SPECS, cpuCores: 0 }, gpus: [] });
    await eventually(async () => expect((await node(n.id)).status).toBe("offline"));
    await agent.close();
  });

  it("uptime is the time between heartbeats, each gap at most three intervals, over 24 h, 7 d and 30 d, or the node's life so far", async () => {
    // On a clock hour, so each window's start is exact.
    h.clock.ms = Math.ceil(h.clock.ms / HOUR) * HOUR;
    const n = await h.connectedNode(op.token);
    const uptime = async () => (await node(n.id)).uptime;
    // An hour of heartbeats every 10 s (the interval), the last one on the next clock hour.
    const anHour = async () => {
      for (let i = 0; i < 360; i++) {
        h.clock.advance(10 * S);
        h.deps.agents.heartbeats.note(n.id, h.clock.now());
        await h.deps.agents.heartbeats.flush();
      }
    };
    await anHour();
    h.clock.advance(HOUR);
    // One hour heard of its two hours of life.
    expect(await uptime()).toEqual({ last24h: 50, last7d: 50, last30d: 50 });
    expect((await node(n.id)).uptimePercent).toBe(50);
    // A heartbeat after an hour's silence adds three intervals (30 s), not the hour.
    await beat(n.agent, n.id);
    expect(await uptime()).toEqual({ last24h: 50.4, last7d: 50.4, last30d: 50.4 });

    // Forty days on, an hour after its agent is back: the first hours are out of every window.
    await n.agent.close();
    h.clock.advance(40 * DAY - 2 * HOUR);
    await SimAgent.connect(h.url, n.agentToken);
    await eventually(() => expect(h.deps.agents.isConnected(n.id)).toBe(true));
    await anHour();
    // 1 h of 24 h, of 168 h and of 720 h.
    expect(await uptime()).toEqual({ last24h: 4.2, last7d: 0.6, last30d: 0.1 });
    const listed = (await h.call("GET", "/nodes?limit=100")).json.nodes.find((x: { id: string }) => x.id === n.id);
    expect(listed.uptimePercent).toBe(0.1);
    const mine = (await h.call("GET", "/operator/nodes", { token: op.token })).json.nodes.find((x: { id: string }) => x.id === n.id);
    expect(mine.uptime).toEqual({ last24h: 4.2, last7d: 0.6, last30d: 0.1 });
  });
});
