import { AGENT_MIN_INBOUND_FRAME_BYTES, CURRENT_PROTOCOL_VERSION, type DeploymentSpec, ENV_MAX_TOTAL_BYTES } from "@cm/protocol";
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { syncParts } from "../../src/agents/desired-state";
import { type AgentHarness, eventually, startAgentHarness } from "./support/agent-harness";
import { SimAgent, SPECS } from "./support/sim-agent";

// Issue 29, item 1: a tenant filled a node's sync past the agent's frame limit
// with failed, deleted deployments carrying big envs, and the node never served again.

/** About 60 KiB of env: under the per-deployment bound, so 18 of them weigh over 1 MiB. */
const BIG_ENV = { A: "a".repeat(30 * 1024), B: "b".repeat(30 * 1024) };
const MIB = 1024 * 1024;

/** An agent whose socket reads frames of at most `maxPayload` bytes; `announce`: the limit its hello names. It reports its specs, as an agent does after hello. */
async function agentReading(url: string, token: string, maxPayload: number, announce?: number) {
  const agent = await SimAgent.open(url, { maxPayload });
  agent.send({
    type: "hello",
    token,
    agentVersion: "sim-1",
    protocolVersions: [CURRENT_PROTOCOL_VERSION],
    ...(announce ? { maxFrameBytes: announce } : {}),
  });
  await agent.next("welcome");
  agent.send({ type: "specs", specs: SPECS, gpus: [] });
  return agent;
}

/** Every part of the sync, reassembled as an agent does. */
async function wholeSync(agent: SimAgent): Promise<{ deployments: DeploymentSpec[]; parts: number }> {
  const deployments: DeploymentSpec[] = [];
  for (let parts = 1; ; parts++) {
    const part = await agent.next("sync");
    deployments.push(...part.deployments);
    if (!part.more) return { deployments, parts };
  }
}

describeEachDatabase("a node's sync on $name", (db) => {
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
  // A node is online once its first specs are stored (a specs frame is handled after the hello).
  const online = (nodeId: string) => eventually(async () => expect((await h.deps.repos.nodes.get(nodeId))?.status).toBe("online"));

  it("refuses an env over its bound in all with a 400", async () => {
    const node = await h.connectedNode(op.token);
    const env = { A: "a".repeat(30 * 1024), B: "b".repeat(30 * 1024), C: "c".repeat(30 * 1024) };
    const r = await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId: node.id, customImage: "busybox:1.36", env } });
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe("VALIDATION_ERROR");
    expect(r.json.error.message).toContain(`${ENV_MAX_TOTAL_BYTES / 1024} KiB`);
    await node.agent.close();
  });

  it("failed and deleted deployments never resend their env: the agent takes its sync, and the node recovers once they are gone", async () => {
    const node = await h.registerNode(op.token, { maxDeployments: 40 });
    let agent = await agentReading(h.url, node.agentToken, AGENT_MIN_INBOUND_FRAME_BYTES, AGENT_MIN_INBOUND_FRAME_BYTES);
    await agent.next("sync");
    await online(node.id);
    const ids: string[] = [];
    for (let i = 0; i < 18; i++) {
      const d = await h.deploy(tenant.token, node.id, agent, { env: BIG_ENV });
      agent.report(d.spec, "failed", { reason: "image not found" });
      await eventually(async () => expect((await h.getDeployment(d.id, tenant.token)).status).toBe("failed"));
      expect((await h.call("DELETE", `/deployments/${d.id}`, { token: tenant.token })).status).toBe(200);
      await agent.command(d.id, "remove");
      ids.push(d.id);
    }
    // The agent restarts before confirming any removal: 18 × 60 KiB of env would not fit its 1 MiB.
    await agent.close();
    agent = await agentReading(h.url, node.agentToken, AGENT_MIN_INBOUND_FRAME_BYTES, AGENT_MIN_INBOUND_FRAME_BYTES);
    const sync = await wholeSync(agent);
    expect(sync.deployments.map((d) => d.deploymentId).sort()).toEqual([...ids].sort());
    for (const d of sync.deployments) {
      expect(d.desiredState).toBe("removed");
      expect(d.env).toEqual({});
    }
    expect((await h.call("GET", `/nodes/${node.id}`)).json.node.status).toBe("online");
    // The agent removes them; its next connection is told of nothing.
    for (const d of sync.deployments) agent.report(d, "removed");
    await eventually(async () => expect(await h.deps.repos.deployments.desiredForNode(node.id)).toEqual([]));
    await agent.close();
    agent = await agentReading(h.url, node.agentToken, AGENT_MIN_INBOUND_FRAME_BYTES, AGENT_MIN_INBOUND_FRAME_BYTES);
    expect((await wholeSync(agent)).deployments).toEqual([]);
    await agent.close();
  });

  it("a desired state larger than the agent's frame comes in parts, each envs intact", async () => {
    const node = await h.registerNode(op.token, { maxDeployments: 40 });
    let agent = await agentReading(h.url, node.agentToken, AGENT_MIN_INBOUND_FRAME_BYTES, AGENT_MIN_INBOUND_FRAME_BYTES);
    await agent.next("sync");
    await online(node.id);
    const ids: string[] = [];
    for (let i = 0; i < 18; i++) {
      const d = await h.deploy(tenant.token, node.id, agent, { env: BIG_ENV });
      await h.run(agent, d.spec, tenant.token);
      ids.push(d.id);
    }
    await agent.close();
    // Read with a 1 MiB socket: a frame over it would close the connection (1009) and no sync would come.
    agent = await agentReading(h.url, node.agentToken, AGENT_MIN_INBOUND_FRAME_BYTES, AGENT_MIN_INBOUND_FRAME_BYTES);
    const sync = await wholeSync(agent);
    expect(sync.parts).toBeGreaterThan(1);
    expect(sync.deployments.map((d) => d.deploymentId).sort()).toEqual([...ids].sort());
    for (const d of sync.deployments) expect(d.env).toEqual(BIG_ENV);
    for (const id of ids) {
      expect((await h.call("POST", `/deployments/${id}/stop`, { token: tenant.token })).status).toBe(200);
    }
    await agent.close();
  });

  it("an agent that cannot read what it was sent is shown offline at once, and online again once it reads it", async () => {
    const node = await h.registerNode(op.token);
    // An agent that reads less than it says (announces nothing: the default 16 MiB).
    const small = await agentReading(h.url, node.agentToken, 16 * 1024);
    await small.next("sync");
    await online(node.id);
    const r = await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId: node.id, customImage: "busybox:1.36", env: BIG_ENV } });
    expect(r.status).toBe(201);
    await small.closed; // ws sends 1009 and drops the connection
    await eventually(async () => expect((await h.call("GET", `/nodes/${node.id}`)).json.node.status).toBe("offline"));
    const able = await agentReading(h.url, node.agentToken, MIB, MIB);
    const sync = await wholeSync(able);
    expect(sync.deployments.map((d) => [d.deploymentId, d.env])).toEqual([[r.json.deployment.id, BIG_ENV]]);
    await eventually(async () => expect((await h.call("GET", `/nodes/${node.id}`)).json.node.status).toBe("online"));
    await able.close();
  });
});

describe("syncParts", () => {
  const spec = (id: string, envBytes: number): DeploymentSpec => ({
    deploymentId: id,
    userId: "usr_1",
    runSeq: 1,
    desiredState: "running",
    image: "busybox",
    env: envBytes ? { V: "v".repeat(envBytes) } : {},
    ports: [],
    gpuCount: 0,
    logCursor: { seq: 0, dockerTs: null },
  });

  it("keeps every part within its size, in order, and a spec too big for the agent out", () => {
    const specs = [spec("a", 400), spec("b", 400), spec("c", 5000), spec("d", 400), spec("e", 20_000)];
    const { parts, tooBig } = syncParts(specs, 1200, 10_000);
    expect(parts.flat().map((s) => s.deploymentId)).toEqual(["a", "b", "c", "d"]);
    expect(tooBig.map((s) => s.deploymentId)).toEqual(["e"]);
    for (const part of parts) {
      const bytes = Buffer.byteLength(JSON.stringify({ type: "sync", deployments: part, more: true }));
      expect(part.length === 1 || bytes <= 1200).toBe(true);
      expect(bytes).toBeLessThanOrEqual(10_000);
    }
    expect(parts.find((p) => p.some((s) => s.deploymentId === "c"))).toHaveLength(1);
  });

  it("an empty state is one empty part", () => {
    expect(syncParts([], 1000, 1000)).toEqual({ parts: [[]], tooBig: [] });
  });
});
