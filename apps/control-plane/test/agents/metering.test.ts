import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { costMicro } from "../../src/services/charges";
import { type AgentHarness, eventually, startAgentHarness } from "./support/agent-harness";
import { SimAgent } from "./support/sim-agent";

const S = 1000;

describeEachDatabase("metering on $name", (db) => {
  let h: AgentHarness;
  let op: Awaited<ReturnType<AgentHarness["signIn"]>>;

  beforeAll(async () => {
    h = await startAgentHarness(db);
    op = await h.signIn();
  });
  afterAll(() => h.close());

  async function tenantWith(credits: number) {
    const t = await h.signIn();
    await h.grantCredits(t.user.id, credits);
    return t;
  }
  const row = async (id: string) => (await h.deps.repos.deployments.get(id))!;
  const usage = async (userId: string) => (await h.deps.repos.ledger.list(userId, "usage", 1, 10_000)).rows;
  /** The agent says it is alive now, and the control plane has noted it: ticks charge up to the last heartbeat. */

  it("charges a running deployment to the second, keeping an hour held, with one usage row per charge", async () => {
    const t = await tenantWith(1000);
    const node = await h.connectedNode(op.token, { hourlyRateCents: 50 });
    const { id, spec } = await h.deploy(t.token, node.id, node.agent);
    h.clock.advance(30 * S); // pulling and starting are free
    await h.deps.metering.tick();
    expect((await row(id)).totalCostMicro).toBe(0);
    await h.run(node.agent, spec, t.token);

    h.clock.advance(60 * S);
    await h.beat(node.agent, node.id);
    await h.deps.metering.tick();
    expect(await row(id)).toMatchObject({ totalCostMicro: 833_333, billedMs: 60_000, reservedMicro: 50_000_000 });
    expect((await h.getDeployment(id, t.token)).totalCost).toBe(0.833333);
    const [first] = await usage(t.user.id);
    expect(first).toMatchObject({ amountMicro: -833_333, deploymentId: id, description: `deployment ${id}: 60 s at 50 credits/h` });

    h.clock.advance(30_500);
    await h.beat(node.agent, node.id);
    await h.deps.metering.tick();
    await h.deps.metering.tick(); // a second tick at the same instant charges nothing
    expect((await row(id)).totalCostMicro).toBe(costMicro(50, 90_500));
    expect(await usage(t.user.id)).toHaveLength(2);
    const books = await h.checkBooks(t.user.id);
    expect(books).toMatchObject({ balanceMicro: 1000_000_000 - 1_256_944, reservedMicro: 50_000_000, totalUsedMicro: 1_256_944 });
    await node.agent.close();
  });

  it("does not drift: 1,000 ticks of odd seconds at 7 credits/h cost what one charge for the whole time costs", async () => {
    const t = await tenantWith(1000);
    const node = await h.connectedNode(op.token, { hourlyRateCents: 7 });
    const { id, spec } = await h.deploy(t.token, node.id, node.agent);
    await h.run(node.agent, spec, t.token);
    let totalMs = 0;
    for (let i = 0; i < 1000; i++) {
      const step = (2 * (i % 9) + 1) * S; // 1, 3, 5, ... 17 s
      h.clock.advance(step);
      totalMs += step;
      await h.beat(node.agent, node.id);
      await h.deps.metering.tick();
    }
    const one = costMicro(7, totalMs);
    expect(one).toBe(Math.floor((7 * 1_000_000 * totalMs) / 3_600_000));
    expect((await row(id)).totalCostMicro).toBe(one);
    expect((await usage(t.user.id)).reduce((s, r) => s + r.amountMicro, 0)).toBe(-one);
    await h.checkBooks(t.user.id);
    await node.agent.close();
  });

  it("settles the remainder when a deployment is stopped, exits or is deleted, and charges nothing after", async () => {
    const t = await tenantWith(1000);
    const node = await h.connectedNode(op.token, { hourlyRateCents: 50 });
    const a = await h.deploy(t.token, node.id, node.agent);
    const b = await h.deploy(t.token, node.id, node.agent);
    const c = await h.deploy(t.token, node.id, node.agent);
    for (const d of [a, b, c]) await h.run(node.agent, d.spec, t.token);

    h.clock.advance(100 * S);
    expect((await h.call("POST", `/deployments/${a.id}/stop`, { token: t.token })).json.deployment.status).toBe("stopping");
    expect((await row(a.id)).totalCostMicro).toBe(costMicro(50, 100 * S));
    h.clock.advance(7 * S);
    node.agent.report(b.spec, "exited", { exitCode: 3 });
    await eventually(async () => expect((await row(b.id)).status).toBe("exited"));
    expect((await row(b.id)).totalCostMicro).toBe(costMicro(50, 107 * S));
    h.clock.advance(5 * S);
    await h.call("DELETE", `/deployments/${c.id}`, { token: t.token });
    const deleted = (await h.deps.repos.deployments.getOnNode(c.id, node.id))!;
    expect(deleted).toMatchObject({ totalCostMicro: costMicro(50, 112 * S), reservedMicro: 0 });

    h.clock.advance(600 * S);
    await h.deps.metering.tick();
    node.agent.report(a.spec, "stopped");
    await eventually(async () => expect((await row(a.id)).status).toBe("stopped"));
    expect((await row(a.id)).totalCostMicro).toBe(costMicro(50, 100 * S));
    expect((await row(b.id)).totalCostMicro).toBe(costMicro(50, 107 * S));
    const books = await h.checkBooks(t.user.id);
    expect(books.reservedMicro).toBe(0);
    expect(books.totalUsedMicro).toBe(costMicro(50, 100 * S) + costMicro(50, 107 * S) + costMicro(50, 112 * S));
    await node.agent.close();
  });

  it("stops a deployment whose credits run out, before its owner owes anything", async () => {
    const t = await tenantWith(52); // an hour held at 50 credits/h, 2 credits to spare
    const node = await h.connectedNode(op.token, { hourlyRateCents: 50 });
    const { id, spec } = await h.deploy(t.token, node.id, node.agent);
    await h.run(node.agent, spec, t.token);
    let minutes = 0;
    while ((await row(id)).status === "running" && minutes < 100) {
      h.clock.advance(60 * S);
      minutes++;
      await h.beat(node.agent, node.id);
      await h.deps.metering.tick();
      await h.checkBooks(t.user.id);
    }
    const d = await row(id);
    expect(d).toMatchObject({ status: "stopping", desiredState: "stopped", statusReason: "stopped: your credits ran out" });
    // 52 credits buy 62.4 minutes: it is stopped when the next minute is no longer covered.
    expect(minutes).toBe(62);
    expect(d.totalCostMicro).toBe(costMicro(50, 62 * 60 * S));
    expect((await node.agent.command(id, "stop")).deployment.desiredState).toBe("stopped");
    node.agent.report(spec, "stopped");
    await eventually(async () => expect((await row(id)).status).toBe("stopped"));
    expect((await row(id)).statusReason).toBe("stopped: your credits ran out");
    const books = await h.checkBooks(t.user.id);
    expect(books).toMatchObject({ reservedMicro: 0, balanceMicro: 52_000_000 - d.totalCostMicro });
    await node.agent.close();
  });

  it("charges nothing while a node is unreachable, and ends its deployments once it is lost: charged up to its last heartbeat", async () => {
    const t = await tenantWith(1000);
    const quiet = await h.connectedNode(op.token, { hourlyRateCents: 50 });
    const closing = await h.connectedNode(op.token, { hourlyRateCents: 50 });
    const a = await h.deploy(t.token, quiet.id, quiet.agent);
    const b = await h.deploy(t.token, closing.id, closing.agent);
    await h.run(quiet.agent, a.spec, t.token);
    await h.run(closing.agent, b.spec, t.token);
    h.clock.advance(20 * S);
    await h.beat(quiet.agent, quiet.id);
    await h.beat(closing.agent, closing.id);

    // 25 s of silence: still online, and charged only up to the heartbeats.
    h.clock.advance(25 * S);
    await h.deps.agents.tick();
    await h.deps.metering.tick();
    expect(await row(a.id)).toMatchObject({ status: "running", totalCostMicro: costMicro(50, 20 * S) });
    expect(await row(b.id)).toMatchObject({ status: "running", totalCostMicro: costMicro(50, 20 * S) });

    // One agent's socket closes: nothing is charged past its last heartbeat while it is away.
    await closing.agent.close();
    await h.deps.metering.tick();
    expect(await row(b.id)).toMatchObject({ status: "running", totalCostMicro: costMicro(50, 20 * S) });

    // Both stay silent: past three missed heartbeats they are offline, their deployments
    // left running (the hold kept), saying the node is unreachable, charged nothing more.
    h.clock.advance(6 * S);
    await h.deps.agents.tick();
    expect((await h.call("GET", `/nodes/${quiet.id}`)).json.node.status).toBe("offline");
    for (const id of [a.id, b.id]) {
      expect(await row(id)).toMatchObject({ status: "running", desiredState: "running", totalCostMicro: costMicro(50, 20 * S) });
      expect((await row(id)).reservedMicro).toBeGreaterThan(0);
      expect((await row(id)).statusReason).toMatch(/^node unreachable since .*: its container is left as it is and nothing is charged until the node is back/);
    }
    // Past NODE_LOST_AFTER_S (300 s) since their last heartbeat: lost, the deployments failed saying when it was last heard of.
    h.clock.advance(240 * S);
    await h.deps.agents.tick();
    expect((await row(a.id)).status).toBe("running");
    h.clock.advance(40 * S);
    await h.deps.agents.tick();
    expect(await row(b.id)).toMatchObject({ status: "failed", desiredState: "stopped", totalCostMicro: costMicro(50, 20 * S), reservedMicro: 0 });
    expect((await row(b.id)).statusReason).toMatch(
      /^node lost: nothing heard from it since .*, more than 300 s; the deployment ended there and is no longer charged/,
    );
    expect(await row(a.id)).toMatchObject({ status: "failed", desiredState: "stopped", totalCostMicro: costMicro(50, 20 * S), reservedMicro: 0 });
    // Back later: told to keep its stopped container, the tenant's files with it, for LOST_RETENTION_S (a day) from the loss.
    const back = await SimAgent.connect(h.url, closing.agentToken);
    expect(back.sync.deployments.find((d) => d.deploymentId === b.id)).toMatchObject({
      desiredState: "stopped",
      removeAfter: (await row(b.id)).stoppedAt! + 86_400 * S,
    });
    await back.agent.close();
    h.clock.advance(600 * S);
    await h.deps.metering.tick();
    const books = await h.checkBooks(t.user.id);
    expect(books).toMatchObject({ reservedMicro: 0, totalUsedMicro: 2 * costMicro(50, 20 * S) });
  });
  it("settles a node retired while its agent is away at its last proof of life, not at the retirement", async () => {
    const t = await tenantWith(1000);
    const node = await h.connectedNode(op.token, { hourlyRateCents: 50 });
    const d = await h.deploy(t.token, node.id, node.agent);
    await h.run(node.agent, d.spec, t.token);
    h.clock.advance(20 * S);
    await h.beat(node.agent, node.id);
    await node.agent.close();
    // Away 10 s (within the window), then its operator retires it.
    h.clock.advance(10 * S);
    expect((await h.call("DELETE", `/operator/nodes/${node.id}`, { token: op.token })).status).toBe(200);
    await eventually(async () => expect(await row(d.id)).toMatchObject({ status: "failed", reservedMicro: 0 }));
    expect((await row(d.id)).totalCostMicro).toBe(costMicro(50, 20 * S));
  });
});
