import { creditsToMicro, openRepos, type Repos } from "@cm/db";
import { runProgram } from "@cm/testkit/run-program";
import { ensureScriptImage } from "../../../../agent/test/support/script-image";
import { costMicro } from "../../../src/services/charges";
import { newWallet } from "../../support/harness";
import { until } from "../../support/until";
import { type DockerRuns, removeNodeContainers, watchDockerRuns } from "./docker-runs";
import { freePort, type PgCluster, startPgCluster } from "./pg-cluster";
import { type Program, startProgram } from "./processes";

/** 1 credit a second: a deployment's cost in micro-credits is its billed milliseconds x 1000. */
export const RATE_CENTS_PER_HOUR = 3600;

/** A container that prints 1, 2, 3, ... every `everyS` seconds, so lost or repeated lines can be counted. */
export const numberedLines = (everyS = 0.1) => `i=0; while true; do i=$((i+1)); echo "$i"; sleep ${everyS}; done`;

export type FaultSystemOptions = {
  heartbeatIntervalMs: number;
  meterIntervalMs?: number;
  env?: Record<string, string> /** the node's slots, 16 by default */;
  maxDeployments?: number;
};

/**
 * The product as an operator runs it, for fault injection (and for bench/partition.ts,
 * outside vitest: the checks load vitest's expect when they are called): PostgreSQL in a
 * cluster of the test's own, the control plane and the agent each in their own
 * process (configured by environment, as their CLIs are), real Docker. The test
 * holds a connection of its own to the database to check the books afterwards.
 */
export async function startFaultSystem(o: FaultSystemOptions) {
  const image = ensureScriptImage();
  const pg = await startPgCluster();
  // What was started, undone in reverse by close(), or at once if a later step fails.
  const undo: Array<() => unknown> = [() => pg.destroy()];
  const close = async () => {
    for (const step of undo.splice(0).reverse())
      await Promise.resolve()
        .then(step)
        .catch(() => undefined);
  };
  try {
    return await assemble(o, image, pg, undo, close);
  } catch (err) {
    await close();
    throw err;
  }
}

async function assemble(o: FaultSystemOptions, image: string, pg: PgCluster, undo: Array<() => unknown>, close: () => Promise<void>) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const cpEnv = {
    PORT: String(port),
    HOST: "127.0.0.1",
    DATABASE_URL: pg.url,
    LOG_LEVEL: "info",
    HEARTBEAT_INTERVAL_MS: String(o.heartbeatIntervalMs),
    HEARTBEAT_FLUSH_MS: "200",
    METER_INTERVAL_MS: String(o.meterIntervalMs ?? 1000),
    AUTH_RATE_LIMIT_PER_MIN: "100000",
    ACCESS_TOKEN_TTL_S: "3600",
    ...o.env,
  };
  const startControlPlane = async () => {
    const p = startProgram("control-plane", "apps/control-plane/src/index.ts", [], cpEnv);
    await p.waitForLine(/control plane listening/, 60_000);
    return p;
  };
  let cp: Program = await startControlPlane();
  undo.push(() => cp.stop());
  const repos: Repos = await openRepos(pg.url);
  undo.push(() => repos.handle.close());
  let agent: Program | undefined;
  let runs: DockerRuns | undefined;
  let nodeId = "";

  async function call(method: string, path: string, init: { body?: unknown; token?: string; timeoutMs?: number } = {}) {
    const headers: Record<string, string> = {};
    if (init.token) headers.authorization = `Bearer ${init.token}`;
    if (init.body !== undefined) headers["content-type"] = "application/json";
    const started = Date.now();
    const send = () =>
      fetch(url + path, {
        method,
        headers,
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
        signal: AbortSignal.timeout(init.timeoutMs ?? 20_000),
      });
    // A kept-alive connection the server closed (idle 5 s) just as it was reused: the request never arrived, send it again.
    const res = await send()
      .catch((err: unknown) => ((err as { cause?: { code?: string } }).cause?.code === "UND_ERR_SOCKET" ? send() : Promise.reject(err)))
      .catch((err: unknown) => {
        throw new Error(
          `${method} ${path}: ${String(err)} (${String((err as { cause?: unknown }).cause)}); control plane ${cp.running ? "running" : "exited"}:\n${cp.tail(30)}`,
        );
      });
    const text = await res.text();
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, json, text, ms: Date.now() - started };
  }

  // One user is the node's operator and its tenant.
  const wallet = newWallet();
  const nonce = await call("POST", "/auth/nonce", { body: { walletAddress: wallet.address } });
  const verified = await call("POST", "/auth/verify", {
    body: { walletAddress: wallet.address, message: nonce.json.message, signature: wallet.sign(nonce.json.message) },
  });
  const token = verified.json.accessToken as string;
  const userId = verified.json.user.id as string;
  await repos.handle.transaction((tx) =>
    repos.ledger.post(tx, {
      id: `txn_fault_${Date.now()}`,
      userId,
      type: "deposit",
      amountMicro: creditsToMicro(1_000_000),
      description: "fault suite grant",
      createdAt: Date.now(),
    }),
  );
  const node = await call("POST", "/operator/nodes", {
    token,
    body: { name: "fault", region: "eu-west", country: "DE", hourlyRateCents: RATE_CENTS_PER_HOUR, maxDeployments: o.maxDeployments ?? 16 },
  });
  nodeId = node.json.node.id as string;
  const agentToken = node.json.agentToken as string;
  runs = watchDockerRuns(nodeId);
  undo.push(() => {
    runs!.close();
    return removeNodeContainers(nodeId);
  });

  /** The node's agent, talking to the control plane at `controlPlaneUrl` (through a proxy, say), or directly. */
  async function startAgent(controlPlaneUrl = url) {
    // AGENT_EGRESS_POLICY=off: as root the agent would put its egress policy on this machine's firewall and leave
    // it when stopped, as agents do; the policy has its own tests (apps/agent/test/egress).
    const started = startProgram("agent", "apps/agent/src/index.ts", ["run"], {
      CONTROL_PLANE_URL: controlPlaneUrl,
      AGENT_TOKEN: agentToken,
      AGENT_SANDBOX_POOL: "0",
      LOG_LEVEL: "info",
      AGENT_EGRESS_POLICY: "off",
    });
    agent = started;
    undo.push(() => started.stop());
    // Online with its inventory reported: the agent's first host probe can hold its
    // event loop for seconds on a machine with many Docker networks (it may even
    // miss heartbeats and reconnect); the scenarios start once it is past that.
    await until(
      "the node online with its inventory",
      async () => (await call("GET", `/nodes/${nodeId}`)).json?.node?.status === "online" && ((await repos.nodes.get(nodeId))?.cpuCores ?? 0) > 0,
      90_000,
      async () => `${agent?.tail(20)}\n${cp.tail(20)}`,
    );
    return agent;
  }

  /**
   * Asks for the stop and answers when it was asked: billing ends while the
   * control plane handles it, between the request and the answer (`ms`).
   */
  async function stop(id: string) {
    const askedAtMs = Date.now();
    const r = await call("POST", `/deployments/${id}/stop`, { token });
    if (r.status !== 200) throw new Error(`stop ${id}: ${r.status} ${r.text}`);
    return { askedAtMs, ms: r.ms };
  }

  async function deploy(script = numberedLines()) {
    const r = await call("POST", "/deployments", { token, body: { nodeId, customImage: image, env: { SCRIPT: script } } });
    if (r.status !== 201) throw new Error(`create failed: ${r.status} ${r.text}`);
    return r.json.deployment.id as string;
  }

  const deployment = async (id: string) => (await call("GET", `/deployments/${id}`, { token })).json?.deployment;
  const waitStatus = (id: string, status: string, timeoutMs = 60_000) =>
    until(
      `${id} ${status}`,
      async () => (await deployment(id))?.status === status,
      timeoutMs,
      async () => `${JSON.stringify(await deployment(id))}\n${agent?.tail(20)}\n${cp.tail(20)}`,
    );

  /** Line numbers the API holds for a deployment: how many of 1..max are missing, and how many came twice. */
  async function lineCounts(id: string) {
    const logs = (await call("GET", `/deployments/${id}/logs?tail=10000`, { token })).json.logs as Array<{ message: string }>;
    const nums = logs.map((l) => Number(l.message.trim())).filter((n) => Number.isInteger(n));
    const seen = new Set(nums);
    const max = nums.length ? Math.max(...nums) : 0;
    let lost = 0;
    for (let i = 1; i <= max; i++) if (!seen.has(i)) lost++;
    return { max, lost, repeated: nums.length - seen.size };
  }

  /** The ledger's invariants, read from the database itself (as the in-process harness checks them). */
  async function checkBooks() {
    const { expect } = await import("vitest");
    const { checkWholeBooks } = await import("../../support/books");
    const bal = await repos.ledger.balance(userId);
    expect(bal.balanceMicro).toBe(await repos.ledger.sumOfRows(userId));
    expect(bal.availableMicro).toBeGreaterThanOrEqual(0);
    const { rows } = await repos.deployments.list({ userId, page: 1, limit: 100 });
    expect(bal.reservedMicro).toBe(rows.reduce((s, d) => s + d.reservedMicro, 0));
    // A crash or an outage never leaves a charge without its operator's and fee's rows, nor a balance moved outside the ledger.
    await checkWholeBooks(repos);
  }

  /**
   * A deployment that no longer runs was billed floor(rate x seconds / 3600) for
   * the seconds its container really ran (up to `stopAskedAtMs` when the tenant
   * stopped it: billing ends when the stop is asked), within `toleranceMs`.
   * Answers the figures.
   */
  async function checkBilled(id: string, toleranceMs: number, stopAskedAtMs?: number) {
    const { expect } = await import("vitest");
    const dep = (await repos.deployments.getOnNode(id, nodeId))!;
    const ranMs = runs!.ranMs(id, stopAskedAtMs);
    expect(dep.totalCostMicro, `${id}: cost is the floor formula of the billed time`).toBe(costMicro(dep.hourlyRateCents, dep.billedMs));
    const figures = { id, status: dep.status, billedS: dep.billedMs / 1000, ranS: ranMs / 1000, diffS: (dep.billedMs - ranMs) / 1000 };
    expect(Math.abs(dep.billedMs - ranMs), `billed vs ran: ${JSON.stringify(figures)}`).toBeLessThanOrEqual(toleranceMs);
    return figures;
  }

  /** No tenant container runs on the node that its deployment does not want running. */
  async function checkNothingUnwanted() {
    const { expect } = await import("vitest");
    const out = await runProgram("docker", ["ps", "--filter", `label=cm.node-id=${nodeId}`, "--format", '{{.Label "cm.deployment-id"}}']);
    for (const id of out.split("\n").filter(Boolean)) {
      const dep = await repos.deployments.getOnNode(id, nodeId);
      expect(dep?.desiredState, `container of ${id} runs`).toBe("running");
    }
  }

  return {
    pg,
    repos,
    url,
    token,
    userId,
    nodeId,
    runs: runs!,
    get cp() {
      return cp;
    },
    get agent() {
      return agent;
    },
    call,
    startAgent,
    deploy,
    stop,
    deployment,
    waitStatus,
    lineCounts,
    checkBooks,
    checkBilled,
    checkNothingUnwanted,
    /** Stops the control plane (SIGTERM), waits `downMs` more, and starts it again on the same port and database. */
    async restartControlPlane(downMs = 0) {
      await cp.stop();
      await sleep(downMs);
      cp = await startControlPlane();
    },
    close,
  };
}
export type FaultSystem = Awaited<ReturnType<typeof startFaultSystem>>;

export { until };

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
