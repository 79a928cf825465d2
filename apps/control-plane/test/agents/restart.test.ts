import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestDatabase } from "@cm/db/testing";
import { AGENT_RECONNECT_MAX_MS, CLOSE_CODES } from "@cm/protocol";
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, expect, it } from "vitest";
import { eventually, startAgentHarness } from "./support/agent-harness";
import { SimAgent } from "./support/sim-agent";

/** One database that outlives a control plane: the next one opens it again. */
async function durable(db: TestDatabase) {
  let url: string;
  let drop: () => Promise<void>;
  if (db.name === "sqlite") {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cm-restart-"));
    url = `file:${path.join(dir, "plane.db")}`;
    drop = async () => fs.rmSync(dir, { recursive: true, force: true });
  } else {
    ({ url, drop } = await db.create());
  }
  const reopen: TestDatabase = { name: db.name, create: async () => ({ url, drop: async () => undefined }) };
  return { reopen, drop };
}

describeEachDatabase("a control-plane restart on $name", (db) => {
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });

  it("keeps nodes online and desired state intact; changes made while down reach the agent on its reconnect", async () => {
    const store = await durable(db);
    cleanups.push(store.drop);
    const first = await startAgentHarness(store.reopen);
    const op = await first.signIn();
    const tenant = await first.signIn();
    await first.grantCredits(tenant.user.id, 1000);
    const node = await first.connectedNode(op.token);
    const kept = await first.deploy(tenant.token, node.id, node.agent);
    const stoppedLater = await first.deploy(tenant.token, node.id, node.agent);
    await first.run(node.agent, kept.spec, tenant.token);
    await first.run(node.agent, stoppedLater.spec, tenant.token);
    const clockMs = first.clock.now();

    await first.close();
    expect((await node.agent.closed).code).toBe(CLOSE_CODES.GOING_AWAY);

    const second = await startAgentHarness(store.reopen);
    cleanups.push(second.close);
    second.clock.ms = clockMs + 2000;
    // Going away was the control plane's doing, not the node's: nothing failed.
    expect((await second.call("GET", `/nodes/${node.id}`)).json.node.status).toBe("online");
    expect((await second.getDeployment(kept.id, tenant.token)).status).toBe("running");
    // With no agent connected the stop completes at once, and waits in the database for the agent.
    expect((await second.call("POST", `/deployments/${stoppedLater.id}/stop`, { token: tenant.token })).json.deployment.status).toBe("stopped");

    const back = await SimAgent.connect(second.url, node.agentToken);
    const desired = Object.fromEntries(back.sync.deployments.map((d) => [d.deploymentId, d]));
    expect(desired[kept.id]).toEqual({ ...kept.spec, started: true });
    expect(desired[stoppedLater.id]).toMatchObject({ desiredState: "stopped", runSeq: 0 });
    // The new control plane carries on: commands and reports as before.
    expect((await second.call("POST", `/deployments/${kept.id}/stop`, { token: tenant.token })).json.deployment.status).toBe("stopping");
    expect((await back.agent.command(kept.id, "stop")).deployment.desiredState).toBe("stopped");
    back.agent.report(kept.spec, "stopped");
    await eventually(async () => expect((await second.getDeployment(kept.id, tenant.token)).status).toBe("stopped"));
    await second.checkBooks(tenant.user.id);
    await back.agent.close();
  });

  it("waits out an agent's longest reconnection backoff for a node last heard before it started, and only for such a node", async () => {
    const store = await durable(db);
    cleanups.push(store.drop);
    const first = await startAgentHarness(store.reopen);
    const startedAt = first.clock.now(); // every harness's clock starts here: the second's start
    first.clock.ms = startedAt - 60_000;
    const op = await first.signIn();
    const before = await first.connectedNode(op.token);
    await first.close();

    const second = await startAgentHarness(store.reopen);
    cleanups.push(second.close);
    const after = await second.connectedNode(op.token);
    await after.agent.close();
    second.clock.advance(3 * 10_000 + 1000); // three heartbeat intervals
    await second.deps.agents.tick();
    // Heard from since the start, then silent: offline. Last heard before it: its agent may be backing off.
    await eventually(async () => expect((await second.call("GET", `/nodes/${after.id}`)).json.node.status).toBe("offline"));
    expect((await second.call("GET", `/nodes/${before.id}`)).json.node.status).toBe("online");
    second.clock.advance(AGENT_RECONNECT_MAX_MS); // and the longest backoff: this one is not coming back
    await second.deps.agents.tick();
    await eventually(async () => expect((await second.call("GET", `/nodes/${before.id}`)).json.node.status).toBe("offline"));
  });

  it("gives up on a node whose agent does not come back: offline after three heartbeat intervals, its deployments failed once it is lost", async () => {
    const store = await durable(db);
    cleanups.push(store.drop);
    const first = await startAgentHarness(store.reopen);
    const op = await first.signIn();
    const tenant = await first.signIn();
    await first.grantCredits(tenant.user.id, 1000);
    const node = await first.connectedNode(op.token, { hourlyRateCents: 60 });
    const dep = await first.deploy(tenant.token, node.id, node.agent);
    await first.run(node.agent, dep.spec, tenant.token);
    const startMs = first.clock.now();
    first.clock.advance(60_000);
    node.agent.heartbeat();
    await eventually(() => expect(first.deps.agents.lastSeenMs(node.id)).toBe(startMs + 60_000));
    await first.deps.metering.tick();
    await first.close();

    const second = await startAgentHarness(store.reopen);
    cleanups.push(second.close);
    second.clock.ms = startMs + 60_000 + 20_000;
    await second.deps.metering.tick(); // no session: not charged while nobody can vouch for it
    await second.deps.agents.tick();
    expect((await second.call("GET", `/nodes/${node.id}`)).json.node.status).toBe("online");
    second.clock.advance(11_000);
    await second.deps.agents.tick();
    expect((await second.call("GET", `/nodes/${node.id}`)).json.node.status).toBe("offline");
    // Unreachable: left as it is, charged nothing since the heartbeat before the restart.
    expect(await second.getDeployment(dep.id, tenant.token)).toMatchObject({ status: "running", totalCost: 1 });
    // Lost NODE_LOST_AFTER_S (300 s) after its last heartbeat.
    second.clock.ms = startMs + 60_000 + 295_000;
    await second.deps.agents.tick();
    expect((await second.getDeployment(dep.id, tenant.token)).status).toBe("running");
    second.clock.advance(10_000);
    await second.deps.agents.tick();
    const d = await second.getDeployment(dep.id, tenant.token);
    expect(d).toMatchObject({ status: "failed", totalCost: 1 });
    expect(d.statusReason).toMatch(/^node lost: nothing heard from it since /);
    const books = await second.checkBooks(tenant.user.id);
    expect(books).toMatchObject({ reservedMicro: 0, totalUsedMicro: 1_000_000 });
  });
});
