import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

describeEachDatabase("deployment records on $name", (db) => {
  let h: Harness;
  let tenant: Awaited<ReturnType<Harness["signIn"]>>;
  let op: Awaited<ReturnType<Harness["signIn"]>>;
  let gpuNode: string;
  let cpuNode: string;

  beforeAll(async () => {
    h = await startHarness(db);
    op = await h.signIn();
    tenant = await h.signIn();
    gpuNode = (await h.onlineNode(op.token, { gpus: [{ name: "NVIDIA GeForce RTX 4090", vramMb: 24564 }], hourlyRateCents: 60, maxDeployments: 50 })).id;
    cpuNode = (await h.onlineNode(op.token, { cpuCores: 2, ramMb: 1500, hourlyRateCents: 10, maxDeployments: 50 })).id;
    await h.grantCredits(tenant.user.id, 10_000);
  });
  afterAll(() => h.close());

  const create = (body: unknown, token = tenant.token) => h.call("POST", "/deployments", { token, body });

  it("creates a pending deployment from a template, with empty endpoints, zero cost and an hour held", async () => {
    const r = await create({ nodeId: gpuNode, templateId: "ollama", name: "my llm", env: { OLLAMA_KEEP_ALIVE: "1h", EXTRA: "x" } });
    expect(r.status).toBe(201);
    expect(r.json.estimatedHourlyCost).toBe(60);
    const d = r.json.deployment;
    expect(d).toMatchObject({
      userId: tenant.user.id,
      nodeId: gpuNode,
      templateId: "tpl_ollama",
      name: "my llm",
      status: "pending",
      endpoints: [],
      totalCost: 0,
      image: "ollama/ollama:0.5.7",
      diskGb: 30,
    });
    expect(d.env).toEqual({ OLLAMA_HOST: "0.0.0.0:11434", OLLAMA_KEEP_ALIVE: "1h", EXTRA: "x" });
    expect(d.id).toMatch(/^dep_/);
    expect(d.startedAt).toBeUndefined();
    const bal = await h.deps.repos.ledger.balance(tenant.user.id);
    expect(bal.reservedMicro).toBeGreaterThanOrEqual(60_000_000);
    const node = await h.call("GET", `/nodes/${gpuNode}`);
    expect(node.json.node.activeDeployments).toBeGreaterThanOrEqual(1);
  });

  it("creates from a custom image", async () => {
    const r = await create({ nodeId: cpuNode, customImage: "busybox:1.36", ports: [8080] });
    expect(r.status).toBe(201);
    expect(r.json.deployment).toMatchObject({ image: "busybox:1.36", ports: [8080], status: "pending" });
    expect(r.json.deployment.templateId).toBeUndefined();
    // Its allowance is the node's default, which no agent has told here.
    expect(r.json.deployment.diskGb).toBeNull();
  });

  it("says so when both or neither of templateId and customImage are given", async () => {
    const both = await create({ nodeId: gpuNode, templateId: "ollama", customImage: "busybox" });
    expect(both.status).toBe(400);
    expect(both.json.error.code).toBe("TEMPLATE_AND_IMAGE_CONFLICT");
    const neither = await create({ nodeId: gpuNode });
    expect(neither.status).toBe(400);
    expect(neither.json.error.code).toBe("TEMPLATE_OR_IMAGE_REQUIRED");
    const nullImage = await create({ nodeId: gpuNode, customImage: null });
    expect(nullImage.json.error.code).toBe("TEMPLATE_OR_IMAGE_REQUIRED");
  });

  it("validates nodeId, env and the image reference", async () => {
    // nodeId may be left out (placement), but not given empty or as anything but a string.
    for (const nodeId of ["", 5, null]) expect((await create({ nodeId, templateId: "ollama" })).json.error.code).toBe("VALIDATION_ERROR");
    expect((await create({ nodeId: gpuNode, templateId: "ollama", env: { "BAD NAME": "x" } })).json.error.code).toBe("VALIDATION_ERROR");
    expect((await create({ nodeId: gpuNode, templateId: "ollama", env: { A: 1 } })).json.error.code).toBe("VALIDATION_ERROR");
    expect((await create({ nodeId: gpuNode, templateId: "ollama", env: { A: "x".repeat(40_000) } })).json.error.code).toBe("VALIDATION_ERROR");
    const many = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`V${i}`, "1"]));
    expect((await create({ nodeId: gpuNode, templateId: "ollama", env: many })).json.error.code).toBe("VALIDATION_ERROR");
    expect((await create({ nodeId: gpuNode, customImage: "rm -rf /" })).json.error.code).toBe("VALIDATION_ERROR");
  });

  it("refuses unknown nodes and templates, offline nodes, and nodes below the template's minimums, each with its own code", async () => {
    expect((await create({ nodeId: "node_nope", templateId: "ollama" })).json.error.code).toBe("NODE_NOT_FOUND");
    expect((await create({ nodeId: gpuNode, templateId: "nope" })).json.error.code).toBe("TEMPLATE_NOT_FOUND");
    const noGpu = await create({ nodeId: cpuNode, templateId: "ollama" });
    expect(noGpu.status).toBe(422);
    expect(noGpu.json.error.code).toBe("NODE_NO_GPU");
    expect((await create({ nodeId: gpuNode, templateId: "text-generation-inference" })).json.error.code).toBe("NODE_INSUFFICIENT_GPU_VRAM");
    expect((await create({ nodeId: cpuNode, templateId: "jupyter-scipy" })).json.error.code).toBe("NODE_INSUFFICIENT_RAM");
    const smallCpu = (await h.onlineNode(op.token, { cpuCores: 1, ramMb: 64_000 })).id;
    expect((await create({ nodeId: smallCpu, templateId: "python-web" })).status).toBe(201);
    const tiny = (await h.onlineNode(op.token, { cpuCores: 1, ramMb: 64_000, gpus: [{ name: "NVIDIA H100 80GB HBM3", vramMb: 81559 }] })).id;
    expect((await create({ nodeId: tiny, templateId: "vllm-openai" })).json.error.code).toBe("NODE_INSUFFICIENT_CPU");
    const offline = await h.call("POST", "/operator/nodes", {
      token: op.token,
      body: { name: "off", region: "us-west", country: "US", hourlyRateCents: 1, maxDeployments: 1 },
    });
    const r = await create({ nodeId: offline.json.node.id, customImage: "busybox" });
    expect(r.status).toBe(409);
    expect(r.json.error.code).toBe("NODE_OFFLINE");
  });

  it("refuses a full node with NODE_AT_CAPACITY, and a poor tenant with 402 INSUFFICIENT_CREDITS", async () => {
    const one = (await h.onlineNode(op.token, { maxDeployments: 1, hourlyRateCents: 1 })).id;
    expect((await create({ nodeId: one, customImage: "busybox" })).status).toBe(201);
    const full = await create({ nodeId: one, customImage: "busybox" });
    expect(full.status).toBe(409);
    expect(full.json.error.code).toBe("NODE_AT_CAPACITY");

    // A node of its own: gpuNode's GPU, and with it its share of the node, is held by the ollama above.
    const pricey = (await h.onlineNode(op.token, { hourlyRateCents: 60 })).id;
    const poor = await h.signIn();
    await h.grantCredits(poor.user.id, 59);
    const r = await create({ nodeId: pricey, customImage: "busybox" }, poor.token);
    expect(r.status).toBe(402);
    expect(r.json.error.code).toBe("INSUFFICIENT_CREDITS");
    // Refused atomically: the node's slot was not taken.
    const before = (await h.call("GET", `/nodes/${pricey}`)).json.node.activeDeployments;
    await create({ nodeId: pricey, customImage: "busybox" }, poor.token);
    expect((await h.call("GET", `/nodes/${pricey}`)).json.node.activeDeployments).toBe(before);
  });

  it("never takes more slots than maxDeployments under concurrent creates", async () => {
    const node = (await h.onlineNode(op.token, { maxDeployments: 3, hourlyRateCents: 1 })).id;
    const results = await Promise.all(Array.from({ length: 10 }, () => create({ nodeId: node, customImage: "busybox" })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(3);
    expect(results.filter((r) => r.status === 409).every((r) => r.json.error.code === "NODE_AT_CAPACITY")).toBe(true);
  });

  it("lists only the caller's deployments, newest first, paginated and filtered by status", async () => {
    const other = await h.signIn();
    await h.grantCredits(other.user.id, 1000);
    const theirs = await create({ nodeId: cpuNode, customImage: "busybox" }, other.token);
    const seen: string[] = [];
    for (let i = 0; i < 3; i++) {
      h.clock.advance(1000);
      seen.unshift((await create({ nodeId: cpuNode, customImage: "busybox", name: `n${i}` })).json.deployment.id);
    }
    const page1 = await h.call("GET", "/deployments?limit=2", { token: tenant.token });
    expect(page1.json.deployments.map((d: { id: string }) => d.id)).toEqual(seen.slice(0, 2));
    expect(page1.json.pagination).toMatchObject({ page: 1, limit: 2 });
    const all = await h.call("GET", "/deployments?limit=100", { token: tenant.token });
    expect(all.json.deployments.every((d: { userId: string }) => d.userId === tenant.user.id)).toBe(true);
    expect(all.json.pagination.total).toBe(all.json.deployments.length);
    const pending = await h.call("GET", "/deployments?status=pending&limit=100", { token: tenant.token });
    expect(pending.json.deployments.every((d: { status: string }) => d.status === "pending")).toBe(true);
    expect((await h.call("GET", "/deployments?limit=101", { token: tenant.token })).json.error.code).toBe("VALIDATION_ERROR");
    // Another tenant's deployment does not exist for this one.
    for (const [m, p] of [
      ["GET", ""],
      ["POST", "/start"],
      ["POST", "/stop"],
      ["DELETE", ""],
      ["GET", "/logs"],
    ] as const) {
      const r = await h.call(m, `/deployments/${theirs.json.deployment.id}${p}`, { token: tenant.token });
      expect(r.status).toBe(404);
      expect(r.json.error.code).toBe("DEPLOYMENT_NOT_FOUND");
    }
  });

  it("follows the state machine: stop, start again, 409 with the current status otherwise, delete", async () => {
    const d = (await create({ nodeId: cpuNode, customImage: "busybox" })).json.deployment;
    const heldBefore = (await h.deps.repos.ledger.balance(tenant.user.id)).reservedMicro;
    // No agent is connected, so a stop completes at once.
    const stopped = await h.call("POST", `/deployments/${d.id}/stop`, { token: tenant.token });
    expect(stopped.status).toBe(200);
    expect(stopped.json.deployment).toMatchObject({ id: d.id, status: "stopped" });
    expect((await h.deps.repos.ledger.balance(tenant.user.id)).reservedMicro).toBe(heldBefore - 10_000_000);
    const again = await h.call("POST", `/deployments/${d.id}/stop`, { token: tenant.token });
    expect(again.status).toBe(409);
    expect(again.json.error.code).toBe("INVALID_STATE_TRANSITION");
    expect(again.json.error.details.currentStatus).toBe("stopped");

    const started = await h.call("POST", `/deployments/${d.id}/start`, { token: tenant.token });
    expect(started.status).toBe(200);
    expect(started.json.deployment).toMatchObject({ id: d.id, status: "starting" });
    const twice = await h.call("POST", `/deployments/${d.id}/start`, { token: tenant.token });
    expect(twice.status).toBe(409);
    expect(twice.json.error.details.currentStatus).toBe("starting");

    const del = await h.call("DELETE", `/deployments/${d.id}`, { token: tenant.token });
    expect(del.status).toBe(200);
    expect(del.json).toEqual({ success: true, message: expect.any(String) });
    expect((await h.call("GET", `/deployments/${d.id}`, { token: tenant.token })).status).toBe(404);
    expect((await h.call("DELETE", `/deployments/${d.id}`, { token: tenant.token })).status).toBe(404);
    expect((await h.deps.repos.ledger.balance(tenant.user.id)).reservedMicro).toBe(heldBefore - 10_000_000);
  });

  it("refuses a start the node or the credits cannot take, and takes nothing: no slot, no credits, still stopped", async () => {
    const poor = await h.signIn();
    await h.grantCredits(poor.user.id, 10); // one hour on a 10 credits/h node
    const node = (await h.onlineNode(op.token, { maxDeployments: 2, hourlyRateCents: 10 })).id;
    const a = (await create({ nodeId: node, customImage: "busybox" }, poor.token)).json.deployment;
    expect((await h.call("POST", `/deployments/${a.id}/stop`, { token: poor.token })).status).toBe(200);
    await create({ nodeId: node, customImage: "busybox" }, poor.token); // holds the hour a start of a needs
    const books = async () => ({
      reserved: (await h.deps.repos.ledger.balance(poor.user.id)).reservedMicro,
      slots: (await h.call("GET", `/nodes/${node}`)).json.node.activeDeployments,
    });
    const before = await books();

    const broke = await h.call("POST", `/deployments/${a.id}/start`, { token: poor.token });
    expect(broke.status).toBe(402);
    expect(broke.json.error.code).toBe("INSUFFICIENT_CREDITS");
    expect(await books()).toEqual(before);

    await h.grantCredits(poor.user.id, 10);
    await create({ nodeId: node, customImage: "busybox" }, poor.token).then((r) => expect(r.status).toBe(201)); // the node is full now
    const full = await h.call("POST", `/deployments/${a.id}/start`, { token: poor.token });
    expect(full.status).toBe(409);
    expect(full.json.error.code).toBe("NODE_AT_CAPACITY");
    expect((await h.call("GET", `/deployments/${a.id}`, { token: poor.token })).json.deployment).toMatchObject({ status: "stopped" });
    expect((await books()).slots).toBe(2);
  });

  it("serves logs with an empty list before any line arrives", async () => {
    const d = (await create({ nodeId: cpuNode, customImage: "busybox" })).json.deployment;
    const r = await h.call("GET", `/deployments/${d.id}/logs`, { token: tenant.token });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ logs: [], truncated: false });
    expect((await h.call("GET", `/deployments/${d.id}/logs?since=yesterday`, { token: tenant.token })).json.error.code).toBe("VALIDATION_ERROR");
    expect((await h.call("GET", `/deployments/${d.id}/logs?tail=0`, { token: tenant.token })).json.error.code).toBe("VALIDATION_ERROR");
  });
});
