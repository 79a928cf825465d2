import type { TestDatabase } from "@cm/db/testing";
import { expect } from "vitest";
import type { Config } from "../../../src/config";
import type { DepsOverrides } from "../../../src/deps";
import { checkWholeBooks } from "../../support/books";
import { startHarness } from "../../support/harness";
import { SimAgent } from "./sim-agent";

export type AgentHarness = Awaited<ReturnType<typeof startAgentHarness>>;
export type NodeOptions = { hourlyRateCents?: number; maxDeployments?: number; gpus?: number };

/** The API harness with timers off (tests tick the monitor and the meter), tokens that outlive the hours a test moves the clock, and helpers for nodes with agents. */
export async function startAgentHarness(db: TestDatabase, config: Partial<Config> = {}, overrides: DepsOverrides = {}, port?: number) {
  const h = await startHarness(db, {
    config: { HEARTBEAT_INTERVAL_MS: 10_000, ACCESS_TOKEN_TTL_S: 365 * 24 * 3600, ...config },
    overrides: { manualTicks: true, ...overrides },
    ...(port !== undefined ? { port } : {}),
  });

  async function registerNode(operatorToken: string, o: NodeOptions = {}) {
    const r = await h.call("POST", "/operator/nodes", {
      token: operatorToken,
      body: { name: "gpu-box", region: "eu-west", country: "DE", hourlyRateCents: o.hourlyRateCents ?? 50, maxDeployments: o.maxDeployments ?? 8 },
    });
    if (r.status !== 201) throw new Error(`node create failed: ${r.text}`);
    return { id: r.json.node.id as string, agentToken: r.json.agentToken as string };
  }

  /** A registered node whose agent is connected, has reported its inventory, and is online. */
  async function connectedNode(operatorToken: string, o: NodeOptions = {}) {
    const node = await registerNode(operatorToken, o);
    const { agent, sync } = await SimAgent.connect(h.url, node.agentToken, { gpus: o.gpus ?? 1 });
    await eventually(async () => expect((await h.deps.repos.nodes.get(node.id))?.gpuCount).toBe(o.gpus ?? 1));
    return { ...node, agent, sync };
  }

  /** A deployment created through the API, and the create command its agent received. */
  async function deploy(tenantToken: string, nodeId: string, agent: SimAgent, body: Record<string, unknown> = {}) {
    const r = await h.call("POST", "/deployments", { token: tenantToken, body: { nodeId, customImage: "busybox:1.36", ...body } });
    if (r.status !== 201) throw new Error(`deployment create failed: ${r.text}`);
    const cmd = await agent.command(r.json.deployment.id, "create");
    return { id: r.json.deployment.id as string, spec: cmd.deployment, cmd };
  }

  /** Drives a deployment to running the way an agent does. */
  async function run(agent: SimAgent, spec: { deploymentId: string; runSeq: number }, token: string) {
    for (const s of ["pulling", "starting", "running"]) agent.report(spec, s);
    await eventually(async () => expect((await h.call("GET", `/deployments/${spec.deploymentId}`, { token })).json.deployment.status).toBe("running"));
  }

  /** A heartbeat from the node's agent (naming the deployments `running`), once the control plane has seen it at the clock's now. */
  async function beat(agent: SimAgent, nodeId: string, running: string[] = []) {
    agent.heartbeat(running);
    await eventually(() => expect(h.deps.agents.lastSeenMs(nodeId)).toBe(h.clock.now()));
  }

  /** `minutes` metered minutes of what runs on the node: each a minute on the clock, a heartbeat seen, and a meter tick. */
  async function meterMinutes(agent: SimAgent, nodeId: string, minutes: number) {
    for (let minute = 0; minute < minutes; minute++) {
      h.clock.advance(60_000);
      await beat(agent, nodeId);
      await h.deps.metering.tick();
    }
  }

  const getDeployment = async (id: string, token: string) => (await h.call("GET", `/deployments/${id}`, { token })).json.deployment;

  /** The ledger's invariants: balance is the sum of its rows, nothing is held that is not there, holds add up, and the whole books' (checkWholeBooks). */
  async function checkBooks(userId: string) {
    const bal = await h.deps.repos.ledger.balance(userId);
    expect(bal.balanceMicro).toBe(await h.deps.repos.ledger.sumOfRows(userId));
    expect(bal.availableMicro).toBeGreaterThanOrEqual(0);
    const { rows } = await h.deps.repos.deployments.list({ userId, page: 1, limit: 100 });
    expect(bal.reservedMicro).toBe(rows.reduce((s, d) => s + d.reservedMicro, 0));
    await checkWholeBooks(h.deps.repos);
    return bal;
  }

  return { ...h, registerNode, connectedNode, deploy, run, beat, meterMinutes, getDeployment, checkBooks };
}

/** Retries an assertion until it holds: frames are processed after the socket write returns. */
export async function eventually<T>(fn: () => Promise<T> | T, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 2));
    }
  }
}
