// Two tenants on one 4-GPU node through its agent: each is sent its own
// gpuCount, cores and memory (the agent picks disjoint GPUs, see the agent's
// reconcile/gpu-sharing.test.ts), each is charged its own rate, the node's
// price per GPU-hour times its GPUs, and the books add up.
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type AgentHarness, startAgentHarness } from "./support/agent-harness";

const HOUR = 3600 * 1000;

describeEachDatabase("two tenants sharing a node's GPUs on $name", (db) => {
  let h: AgentHarness;
  let op: Awaited<ReturnType<AgentHarness["signIn"]>>;

  beforeAll(async () => {
    h = await startAgentHarness(db);
    op = await h.signIn();
  });
  afterAll(() => h.close());

  it("sends each its own GPUs, cores and memory and charges each the node's rate per GPU", async () => {
    const node = await h.connectedNode(op.token, { gpus: 4, hourlyRateCents: 30 });
    const [a, b] = [await h.signIn(), await h.signIn()];
    await h.grantCredits(a.user.id, 1000);
    await h.grantCredits(b.user.id, 1000);
    const one = await h.deploy(a.token, node.id, node.agent, { gpuCount: 1 });
    const three = await h.deploy(b.token, node.id, node.agent, { gpuCount: 3 });
    // sim-agent.ts reports 32 cores and 128,000 MB, 115,200 of it for deployments.
    expect(one.spec).toMatchObject({ gpuCount: 1, cpuCores: 8, memoryMb: 28_800 });
    expect(three.spec).toMatchObject({ gpuCount: 3, cpuCores: 24, memoryMb: 86_400 });
    // The node is full: a third tenant is told so before anything reaches the agent.
    const c = await h.signIn();
    await h.grantCredits(c.user.id, 1000);
    const refused = await h.call("POST", "/deployments", { token: c.token, body: { nodeId: node.id, customImage: "busybox:1.36", gpuCount: 1 } });
    expect([refused.status, refused.json.error.code, refused.json.error.details.freeGpus]).toEqual([409, "NODE_INSUFFICIENT_FREE_GPUS", 0]);

    await h.run(node.agent, one.spec, a.token);
    await h.run(node.agent, three.spec, b.token);
    h.clock.advance(HOUR);
    await h.beat(node.agent, node.id);
    await h.deps.metering.tick();
    expect((await h.getDeployment(one.id, a.token)).totalCost).toBe(30);
    expect((await h.getDeployment(three.id, b.token)).totalCost).toBe(90);
    await h.checkBooks(a.user.id);
    await h.checkBooks(b.user.id);
    await node.agent.close();
  });
});
