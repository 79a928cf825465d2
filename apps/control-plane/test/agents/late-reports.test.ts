import type { ObservedStatus } from "@cm/protocol";
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type AgentHarness, eventually, startAgentHarness } from "./support/agent-harness";
import type { SimAgent } from "./support/sim-agent";

const S = 1000;

// Issue 11, in one process with a clock the test moves: the fault suite
// (test/faults) shows the same with real processes, Docker and PostgreSQL.
describeEachDatabase("reports that arrive late, and an agent that is away, on $name", (db) => {
  let h: AgentHarness;
  let op: Awaited<ReturnType<AgentHarness["signIn"]>>;

  beforeAll(async () => {
    h = await startAgentHarness(db);
    op = await h.signIn();
  });
  afterAll(() => h.close());

  const row = async (id: string) => (await h.deps.repos.deployments.get(id))!;
  const report = (agent: SimAgent, spec: { deploymentId: string; runSeq: number }, status: ObservedStatus, atMs: number, extra: Record<string, unknown> = {}) =>
    agent.send({ type: "status", deploymentId: spec.deploymentId, runSeq: spec.runSeq, status, at: atMs, ...extra });

  it("bills from the agent's running at to its exit at, however late the reports arrive", async () => {
    const t = await h.signIn();
    await h.grantCredits(t.user.id, 10_000);
    const node = await h.connectedNode(op.token, { hourlyRateCents: 3600 });
    const { id, spec } = await h.deploy(t.token, node.id, node.agent);
    const startedAtMs = h.clock.now() + 2 * S;
    h.clock.advance(12 * S); // both reports were held back: they arrive 10 s after the exit
    report(node.agent, spec, "running", startedAtMs);
    await eventually(async () => expect((await row(id)).status).toBe("running"));
    report(node.agent, spec, "exited", startedAtMs + 5 * S, { exitCode: 0 });
    await eventually(async () => expect((await row(id)).status).toBe("exited"));
    expect(await row(id)).toMatchObject({ startedAt: startedAtMs, stoppedAt: startedAtMs + 5 * S, billedMs: 5 * S, totalCostMicro: 5_000_000 });
    await h.checkBooks(t.user.id);
    await node.agent.close();
  });

  it("never takes an agent's time from the future, or from before the deployment was asked for", async () => {
    const t = await h.signIn();
    await h.grantCredits(t.user.id, 10_000);
    const node = await h.connectedNode(op.token, { hourlyRateCents: 3600 });
    const { id, spec } = await h.deploy(t.token, node.id, node.agent);
    const createdAtMs = h.clock.now();
    h.clock.advance(3 * S);
    report(node.agent, spec, "running", createdAtMs - 60 * S);
    await eventually(async () => expect((await row(id)).startedAt).toBe(createdAtMs));
    report(node.agent, spec, "exited", h.clock.now() + 3600 * S, { exitCode: 0 });
    await eventually(async () => expect((await row(id)).status).toBe("exited"));
    expect(await row(id)).toMatchObject({ stoppedAt: h.clock.now(), billedMs: 3 * S });
    await node.agent.close();
  });

  it("bills a stop or a delete while the agent is away up to its last proof of life", async () => {
    const t = await h.signIn();
    await h.grantCredits(t.user.id, 10_000);
    const node = await h.connectedNode(op.token, { hourlyRateCents: 3600 });
    const stopped = await h.deploy(t.token, node.id, node.agent);
    const deleted = await h.deploy(t.token, node.id, node.agent);
    await h.run(node.agent, stopped.spec, t.token);
    await h.run(node.agent, deleted.spec, t.token);
    h.clock.advance(9 * S);
    await h.beat(node.agent, node.id);
    await node.agent.close();
    await eventually(() => expect(h.deps.agents.isConnected(node.id)).toBe(false));
    h.clock.advance(3 * S); // gone: nothing proves the containers ran after the heartbeat

    expect((await h.call("POST", `/deployments/${stopped.id}/stop`, { token: t.token })).status).toBe(200);
    expect((await h.call("DELETE", `/deployments/${deleted.id}`, { token: t.token })).status).toBe(200);
    expect(await row(stopped.id)).toMatchObject({ status: "stopped", billedMs: 9 * S, totalCostMicro: 9_000_000 });
    expect((await h.deps.repos.deployments.getOnNode(deleted.id, node.id))!).toMatchObject({ billedMs: 9 * S, totalCostMicro: 9_000_000 });
    await h.checkBooks(t.user.id);
  });
});
