import { performance } from "node:perf_hooks";
import { needs } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { decodeNotice, encodeNotices } from "../../src/services/replica-bus";
import type { AgentHarness } from "../agents/support/agent-harness";
import { eventually } from "../agents/support/agent-harness";
import { type ReplicaPair, startReplicaPair } from "./support/pair";

// Issue 41: two control planes on one PostgreSQL database. The agent's session
// is on replica A; the tenant talks to replica B. What B decides must reach the
// agent through A, at once, and a wake-up lost on the way is caught by A's sweep.
needs("postgres").describe("two replicas on one PostgreSQL database", () => {
  let a: AgentHarness;
  let b: AgentHarness;
  let pair: ReplicaPair;

  beforeAll(async () => {
    pair = await startReplicaPair();
    ({ a, b } = pair);
  });
  afterAll(() => pair?.close());

  it("carries a create, a stop, a start and a delete made on B to the agent connected to A", async () => {
    const op = await a.signIn();
    const tenant = await b.signIn();
    await b.grantCredits(tenant.user.id, 1000);
    const node = await a.connectedNode(op.token);

    const latencies: number[] = [];
    const timed = async <T>(fn: () => Promise<unknown>, wait: () => Promise<T>) => {
      const t0 = performance.now();
      await fn();
      const got = await wait();
      latencies.push(performance.now() - t0);
      return got;
    };

    const created = await timed(
      () => b.call("POST", "/deployments", { token: tenant.token, body: { nodeId: node.id, customImage: "busybox:1.36" } }),
      () => node.agent.next("command", (c) => c.action === "create", 3000),
    );
    const id = created.deployment.deploymentId;
    for (const s of ["pulling", "starting", "running"]) node.agent.report(created.deployment, s);
    // Reported to A, read on B.
    await eventually(async () => expect((await b.getDeployment(id, tenant.token)).status).toBe("running"));

    await timed(
      () => b.call("POST", `/deployments/${id}/stop`, { token: tenant.token }),
      () => node.agent.command(id, "stop"),
    );
    node.agent.report(created.deployment, "stopped");
    await eventually(async () => expect((await b.getDeployment(id, tenant.token)).status).toBe("stopped"));
    const started = await timed(
      () => b.call("POST", `/deployments/${id}/start`, { token: tenant.token }),
      () => node.agent.command(id, "start"),
    );
    expect(started.deployment.runSeq).toBe(1);
    node.agent.report(started.deployment, "stopped");
    await timed(
      () => b.call("DELETE", `/deployments/${id}`, { token: tenant.token }),
      () => node.agent.command(id, "remove"),
    );
    // Every command crossed by its wake-up, none waited for the sweep (5 s).
    expect(Math.max(...latencies)).toBeLessThan(1500);
    expect(b.deps.replicas!.counts.sent).toBeGreaterThan(0);
    expect(a.deps.replicas!.counts.received).toBeGreaterThan(0);
    await node.agent.close();
  });

  it("catches a lost wake-up with the sweep: the agent on A is told of a create made on B whose notice never came", async () => {
    const op = await a.signIn();
    const tenant = await b.signIn();
    await b.grantCredits(tenant.user.id, 1000);
    const node = await a.connectedNode(op.token);
    // B's notices are lost on the way (its listening connection was down, say).
    const notifier = (b.deps.replicas as unknown as { o: { notifier: { notify: (p: string) => Promise<void> } } }).o.notifier;
    const notify = notifier.notify;
    notifier.notify = async () => undefined;
    try {
      const r = await b.call("POST", "/deployments", { token: tenant.token, body: { nodeId: node.id, customImage: "busybox:1.36" } });
      expect(r.status).toBe(201);
      await expect(node.agent.next("command", () => true, 500)).rejects.toThrow(/no command frame/);
      // The sweep leaves moves younger than 2 s to their notice: A's clock moves on, then it sweeps.
      a.clock.advance(3000);
      expect(await a.deps.agents.sweep.sweep()).toBe(1);
      const cmd = await node.agent.command(r.json.deployment.id, "create");
      expect(cmd.deployment.deploymentId).toBe(r.json.deployment.id);
      // Told once: the next sweep has nothing to add.
      a.clock.advance(1000);
      expect(await a.deps.agents.sweep.sweep()).toBe(0);
    } finally {
      notifier.notify = notify;
    }
    await node.agent.close();
  });
});

it("notices carry ids only, under PostgreSQL's payload limit, and skip what they do not know", () => {
  const ids = Array.from({ length: 500 }, (_, i) => `dep_${String(i).padStart(20, "0")}`);
  const payloads = encodeNotices("replica_x", new Map([["logs-stored", new Set(ids)]]), 2000);
  expect(payloads.length).toBeGreaterThan(1);
  for (const p of payloads) expect(Buffer.byteLength(p)).toBeLessThanOrEqual(2000);
  const back = payloads.flatMap((p) => decodeNotice(p).items.map((i) => i.id));
  expect(back).toEqual(ids);
  expect(decodeNotice("replica_y d:dep_1 z:dep_2 l:bad/id t:dep_3")).toEqual({
    from: "replica_y",
    items: [
      { topic: "deployment-changed", id: "dep_1" },
      { topic: "deployment-touched", id: "dep_3" },
    ],
  });
});
