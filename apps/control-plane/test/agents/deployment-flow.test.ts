import { AGENT_RECONNECT_MAX_MS } from "@cm/protocol";
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type AgentHarness, eventually, startAgentHarness } from "./support/agent-harness";
import { SimAgent } from "./support/sim-agent";

describeEachDatabase("deployments through the agent on $name", (db) => {
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

  const status = async (id: string) => (await h.getDeployment(id, tenant.token)).status;

  it("sends the agent a create command with the whole spec, and shows its progress up to running with startedAt", async () => {
    const node = await h.connectedNode(op.token, { gpus: 2 });
    const created = await h.call("POST", "/deployments", {
      token: tenant.token,
      body: { nodeId: node.id, customImage: "busybox:1.36", ports: [8080], env: { A: "1" }, gpuCount: 2 },
    });
    const id = created.json.deployment.id;
    const cmd = await node.agent.command(id);
    expect(cmd.action).toBe("create");
    expect(cmd.commandId).toMatch(/^cmd_/);
    expect(cmd.deployment).toEqual({
      deploymentId: id,
      userId: tenant.user.id,
      runSeq: 0,
      desiredState: "running",
      image: "busybox:1.36",
      env: { A: "1" },
      ports: [8080],
      // Both of the node's GPUs, so all of its 32 cores and the 115,200 of its 128,000 MB a node's deployments may hold (sim-agent.ts).
      gpuCount: 2,
      cpuCores: 32,
      // Not asked for: the cores are the container's CPU weight, not a hard quota.
      cpuLimit: "weight",
      memoryMb: 115_200,
      logCursor: { seq: 0, dockerTs: null },
    });
    node.agent.send({ type: "ack", commandId: cmd.commandId, ok: true });

    node.agent.report(cmd.deployment, "pulling");
    node.agent.send({ type: "pull_progress", deploymentId: id, layersDone: 3, layersTotal: 7 });
    await eventually(async () => expect((await h.getDeployment(id, tenant.token)).statusReason).toBe("pulling image: 3/7 layers"));
    expect(await status(id)).toBe("pulling");
    node.agent.report(cmd.deployment, "starting");
    await eventually(async () => expect(await status(id)).toBe("starting"));
    expect((await h.getDeployment(id, tenant.token)).startedAt).toBeUndefined();
    h.clock.advance(5000);
    node.agent.report(cmd.deployment, "running");
    await eventually(async () => expect(await status(id)).toBe("running"));
    const d = await h.getDeployment(id, tenant.token);
    expect(d.startedAt).toBe(new Date(h.clock.now()).toISOString());
    expect(d.statusReason).toBeNull();
    // Reports that overtake each other never move it back down.
    node.agent.report(cmd.deployment, "pulling");
    node.agent.report(cmd.deployment, "starting");
    node.agent.heartbeat([id]);
    await new Promise((r) => setTimeout(r, 50));
    expect(await status(id)).toBe("running");
    await node.agent.close();
  });

  it("stops through stopping: the agent gets a stop command, its report makes it stopped and frees the slot and the hold", async () => {
    const node = await h.connectedNode(op.token);
    const { id, spec } = await h.deploy(tenant.token, node.id, node.agent);
    await h.run(node.agent, spec, tenant.token);
    const stop = await h.call("POST", `/deployments/${id}/stop`, { token: tenant.token });
    expect(stop.json.deployment.status).toBe("stopping");
    const cmd = await node.agent.command(id, "stop");
    expect(cmd.deployment).toMatchObject({ desiredState: "stopped", runSeq: 0 });
    expect((await h.call("GET", `/nodes/${node.id}`)).json.node.activeDeployments).toBe(1);
    node.agent.report(spec, "stopped");
    await eventually(async () => expect(await status(id)).toBe("stopped"));
    expect((await h.getDeployment(id, tenant.token)).statusReason).toBe("stopped by the tenant");
    expect((await h.call("GET", `/nodes/${node.id}`)).json.node.activeDeployments).toBe(0);
    await h.checkBooks(tenant.user.id);
    await node.agent.close();
  });

  it("starts again on a new run, ignores the old run's reports, and records a crash as exited with the exit code", async () => {
    const node = await h.connectedNode(op.token);
    const { id, spec } = await h.deploy(tenant.token, node.id, node.agent);
    await h.run(node.agent, spec, tenant.token);
    node.agent.report(spec, "exited", { exitCode: 0 });
    await eventually(async () => expect(await status(id)).toBe("exited"));
    expect(await h.getDeployment(id, tenant.token)).toMatchObject({ exitCode: 0, statusReason: "the container exited with code 0" });
    // Out of the live states, it must not be restarted by the agent on its own.
    expect((await node.agent.command(id, "stop")).deployment.desiredState).toBe("stopped");

    expect((await h.call("POST", `/deployments/${id}/start`, { token: tenant.token })).json.deployment.status).toBe("starting");
    const start = await node.agent.command(id, "start");
    expect(start.deployment).toMatchObject({ runSeq: 1, desiredState: "running" });
    node.agent.report(spec, "failed", { reason: "late news from run 0" });
    node.agent.report(start.deployment, "running");
    await eventually(async () => expect(await status(id)).toBe("running"));
    expect((await h.getDeployment(id, tenant.token)).exitCode).toBeNull();
    node.agent.report(start.deployment, "exited", { exitCode: 137 });
    await eventually(async () => expect(await status(id)).toBe("exited"));
    expect(await h.getDeployment(id, tenant.token)).toMatchObject({ exitCode: 137, statusReason: "the container exited with code 137" });
    await h.checkBooks(tenant.user.id);
    await node.agent.close();
  });

  it("fails a deployment whose image cannot be pulled, with the agent's reason", async () => {
    const node = await h.connectedNode(op.token);
    const { id, spec } = await h.deploy(tenant.token, node.id, node.agent, { customImage: "ghcr.io/nobody/nothing:1" });
    node.agent.report(spec, "pulling");
    node.agent.report(spec, "failed", { reason: "image ghcr.io/nobody/nothing:1 could not be pulled: not found" });
    await eventually(async () => expect(await status(id)).toBe("failed"));
    expect((await h.getDeployment(id, tenant.token)).statusReason).toMatch(/could not be pulled/);
    await node.agent.close();
  });

  it("deletes: the agent gets a remove command, and once it reports removed the deployment leaves its sync", async () => {
    const node = await h.connectedNode(op.token);
    const { id, spec } = await h.deploy(tenant.token, node.id, node.agent);
    await h.run(node.agent, spec, tenant.token);
    expect((await h.call("DELETE", `/deployments/${id}`, { token: tenant.token })).json.success).toBe(true);
    expect((await node.agent.command(id, "remove")).deployment.desiredState).toBe("removed");
    expect((await h.call("GET", `/deployments/${id}`, { token: tenant.token })).status).toBe(404);
    // Until the agent confirms, a reconnecting agent is told again.
    const again = await SimAgent.connect(h.url, node.agentToken);
    expect(again.sync.deployments.find((d) => d.deploymentId === id)?.desiredState).toBe("removed");
    again.agent.report(spec, "removed");
    await eventually(async () => expect((await h.deps.repos.deployments.getOnNode(id, node.id))?.removedFromNodeAt).not.toBeNull());
    const third = await SimAgent.connect(h.url, node.agentToken);
    expect(third.sync.deployments.map((d) => d.deploymentId)).not.toContain(id);
    await h.checkBooks(tenant.user.id);
    await third.agent.close();
  });

  it("keeps desired state across reconnects: a new connection gets the same sync, and changes made while away", async () => {
    const node = await h.connectedNode(op.token);
    const a = await h.deploy(tenant.token, node.id, node.agent);
    const b = await h.deploy(tenant.token, node.id, node.agent);
    await h.run(node.agent, a.spec, tenant.token);
    // A replacing connection (the agent restarted) takes over without the node going offline.
    const replaced = await SimAgent.connect(h.url, node.agentToken);
    const byId = Object.fromEntries(replaced.sync.deployments.map((d) => [d.deploymentId, d]));
    // Reported running: were its container found missing, it was removed behind the agent's back.
    expect(byId[a.id]).toEqual({ ...a.spec, started: true });
    expect(byId[b.id]).toEqual(b.spec);
    expect(await status(a.id)).toBe("running");

    // While no agent is connected, changes wait in the database for the next sync.
    await replaced.agent.close();
    // A closed socket is not yet a lost node; three silent heartbeat intervals make it
    // offline (and this control plane started moments ago: the longest agent backoff
    // too), its running deployment left as it is, saying why.
    h.clock.advance(31_000 + AGENT_RECONNECT_MAX_MS);
    await h.deps.agents.tick();
    await eventually(async () => expect((await h.call("GET", `/nodes/${node.id}`)).json.node.status).toBe("offline"));
    await eventually(async () =>
      expect(await h.getDeployment(a.id, tenant.token)).toMatchObject({ status: "running", statusReason: expect.stringMatching(/^node unreachable since /) }),
    );
    await h.call("DELETE", `/deployments/${b.id}`, { token: tenant.token });
    const back = await SimAgent.connect(h.url, node.agentToken);
    const after = Object.fromEntries(back.sync.deployments.map((d) => [d.deploymentId, d.desiredState]));
    expect(after).toEqual({ [a.id]: "running", [b.id]: "removed" });
    // Its agent reports it running: the note goes.
    back.agent.report(a.spec, "running");
    await eventually(async () => expect(await h.getDeployment(a.id, tenant.token)).toMatchObject({ status: "running", statusReason: null }));
    await back.agent.close();
  });

  it("never lets one node's agent hear of or touch another node's deployments", async () => {
    const other = await h.signIn();
    await h.grantCredits(other.user.id, 1000);
    const nodeA = await h.connectedNode(op.token);
    const nodeB = await h.connectedNode((await h.signIn()).token);
    const mine = await h.deploy(tenant.token, nodeA.id, nodeA.agent);
    const theirs = await h.deploy(other.token, nodeB.id, nodeB.agent);
    await h.run(nodeB.agent, theirs.spec, other.token);
    // Node A's agent lies about node B's deployment: nothing happens to it.
    nodeA.agent.report(theirs.spec, "failed", { reason: "hijack" });
    nodeA.agent.send({ type: "logs", deploymentId: theirs.id, lines: [{ seq: 1, ts: "2026-11-01T12:00:00.000000001Z", stream: "stdout", message: "x" }] });
    expect((await nodeA.agent.next("error")).code).toBe("UNKNOWN_DEPLOYMENT");
    expect((await h.getDeployment(theirs.id, other.token)).status).toBe("running");
    expect(await h.deps.repos.logs.tail(theirs.id, 10)).toEqual([]);
    await h.call("POST", `/deployments/${theirs.id}/stop`, { token: other.token });
    await nodeB.agent.command(theirs.id, "stop");
    const resync = await SimAgent.connect(h.url, nodeA.agentToken);
    expect(resync.sync.deployments.map((d) => d.deploymentId)).toEqual([mine.id]);
    expect(resync.agent.pending().filter((f) => f.type === "command")).toEqual([]);
    expect(nodeA.agent.pending().filter((f) => f.type === "command" && f.deployment.deploymentId === theirs.id)).toEqual([]);
    await resync.agent.close();
    await nodeB.agent.close();
  });
});
