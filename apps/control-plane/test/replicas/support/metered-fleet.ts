import { creditsToMicro, openRepos } from "@cm/db";
import { createPgDatabase } from "@cm/db/testing";
import postgres from "postgres";
import { costMicro } from "../../../src/services/charges";
import { SimAgent } from "../../agents/support/sim-agent";
import { freePort } from "../../faults/support/pg-cluster";
import { type Program, startProgram } from "../../faults/support/processes";
import { wholeBooks } from "../../support/book-equations";
import { newWallet } from "../../support/harness";

const SECRET = "replicas-share-this-secret-0123456789";
const HEARTBEAT_INTERVAL_MS = 2000;
const METER_INTERVAL_MS = 1000;
const HEARTBEAT_FLUSH_MS = 200;
/** The agents beat twice per interval, as a real agent's timer may drift. */
const BEAT_EVERY_MS = HEARTBEAT_INTERVAL_MS / 2;
/**
 * How far short of an agent's last heartbeat a dead replica's charges may stop:
 * its last meter tick, over the heartbeats it had received by then (a beat, a
 * tick and a flush, plus a second for a loaded machine).
 */
const DEAD_SLACK_MS = BEAT_EVERY_MS + METER_INTERVAL_MS + HEARTBEAT_FLUSH_MS + 1000;

export type FleetOptions = {
  replicas: number;
  nodesPerReplica: number;
  deploymentsPerNode: number;
  /** From every deployment running to the stops. */
  runMs: number;
  /** When, within runMs, the last replica is killed (SIGKILL); its agents reconnect to the others. */
  killAtMs: number;
  /** Nodes' hourly rates in credits (cents), taken in turn: odd ones, so floor() matters. */
  rates?: number[];
  log?: (line: string) => void;
};

/** One connection's proof that a deployment ran: its report of running at `fromMs`, proven to `untilMs`; its charges must end in [lowerMs, untilMs]. */
type Piece = { fromMs: number; untilMs: number; lowerMs: number };

export type MeteredDeployment = {
  id: string;
  rate: number;
  /** Whether its agent was on the killed replica and moved. */
  moved: boolean;
  billedMs: number;
  totalCostMicro: number;
  /** floor(rate x billed seconds / 3600), in micro-credits. */
  exactMicro: number;
  /** The usage rows on the ledger for it: their sum, their count, and the seconds their descriptions say. */
  ledgerMicro: number;
  charges: number;
  describedMs: number;
  /** Proven time as the agent saw it: at most, and at least what a dead replica's lost seconds leave. */
  provenMaxMs: number;
  provenMinMs: number;
  /** Just before the stops: how far behind now its charges were. */
  lagMs: number;
};

export type FleetResult = {
  deployments: MeteredDeployment[];
  killed: { replica: string; agents: number; reconnectMs: number[] };
  /** The books' invariants broken, and the tenant's own (balance = rows, holds add up); [] when all hold. */
  broken: string[];
  seconds: number;
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Issue 41's metering claim, run for real: `replicas` control-plane processes on
 * one fresh PostgreSQL database, protocol-level agents (SimAgent, real `ws`)
 * spread over them, each node running deployments at an odd rate. The last
 * replica is killed outright mid-way; its agents reconnect to the others, as
 * through a load balancer, and report their containers running again. Each
 * deployment is then stopped through the replica holding its agent, and what
 * was charged is read back beside what its agent proved.
 */
export async function runMeteredFleet(o: FleetOptions): Promise<FleetResult> {
  const t0 = performance.now();
  const log = o.log ?? (() => undefined);
  const rates = o.rates ?? [7, 333, 1234, 59, 4001, 17, 611, 97];
  const made = await createPgDatabase();
  const repos = await openRepos(made.url);
  const sql = postgres(made.url, { max: 1, onnotice: () => undefined });
  const replicas: Array<{ name: string; url: string; program: Program }> = [];
  const agents: Array<{ agent: SimAgent; replica: number; nodeId: string; agentToken: string; beats?: NodeJS.Timeout }> = [];
  try {
    await Promise.all(
      Array.from({ length: o.replicas }, async (_, i) => {
        const port = await freePort();
        const program = startProgram(`control-plane ${i}`, "apps/control-plane/src/index.ts", [], {
          PORT: String(port),
          HOST: "127.0.0.1",
          DATABASE_URL: made.url,
          LOG_LEVEL: "info",
          HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_INTERVAL_MS),
          HEARTBEAT_FLUSH_MS: String(HEARTBEAT_FLUSH_MS),
          METER_INTERVAL_MS: String(METER_INTERVAL_MS),
          AUTH_RATE_LIMIT_PER_MIN: "100000",
          ACCESS_TOKEN_TTL_S: "3600",
          COMMAND_SWEEP_MS: "1000",
          REPLICA_ADDRESS: `http://127.0.0.1:${port}`,
          REPLICA_SECRET: SECRET,
        });
        replicas[i] = { name: String.fromCharCode(65 + i), url: `http://127.0.0.1:${port}`, program };
        await program.waitForLine(/control plane listening/, 90_000);
      }),
    );
    log(`${o.replicas} replicas up in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    // One user is the nodes' operator and their tenant, signed in on the first replica.
    const base = replicas[0]!.url;
    const wallet = newWallet();
    const post = async (p: string, body: unknown) =>
      (await fetch(base + p, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })).json();
    const nonce = await post("/auth/nonce", { walletAddress: wallet.address });
    const verified = await post("/auth/verify", { walletAddress: wallet.address, message: nonce.message, signature: wallet.sign(nonce.message) });
    const token = verified.accessToken as string;
    const userId = verified.user.id as string;
    await repos.handle.transaction((tx) =>
      repos.ledger.post(tx, {
        id: `txn_fleet_${Date.now()}`,
        userId,
        type: "deposit",
        amountMicro: creditsToMicro(1_000_000),
        description: "metered fleet grant",
        createdAt: Date.now(),
      }),
    );
    const call = async (url: string, method: string, p: string, body?: unknown) => {
      const res = await fetch(url + p, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
        body: body ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(20_000),
      });
      const json = (await res.json()) as any;
      if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    };

    // Nodes, each agent on its replica; deployments created on the next replica (the command crosses over).
    type Dep = { id: string; runSeq: number; rate: number; agentIndex: number; moved: boolean; pieces: Piece[] };
    const deps: Dep[] = [];
    const lastBeat = new Map<SimAgent, number>();
    const beat = (agent: SimAgent, running: string[]) => {
      const sentAt = Date.now();
      agent.send({ type: "heartbeat", sentAt, running });
      lastBeat.set(agent, sentAt);
    };
    const runningOn = (k: number) => deps.filter((d) => d.agentIndex === k).map((d) => d.id);
    const reportRunning = (agent: SimAgent, d: Dep) => {
      const at = Date.now();
      agent.send({ type: "status", deploymentId: d.id, runSeq: d.runSeq, status: "running", at });
      d.pieces.push({ fromMs: at, untilMs: Number.NaN, lowerMs: Number.NaN });
    };
    const startBeats = (k: number) => {
      const a = agents[k]!;
      a.beats = setInterval(() => beat(a.agent, runningOn(k)), BEAT_EVERY_MS);
    };
    let n = 0;
    for (let r = 0; r < o.replicas; r++)
      for (let k = 0; k < o.nodesPerReplica; k++) {
        const rate = rates[n++ % rates.length]!;
        const node = await call(replicas[r]!.url, "POST", "/operator/nodes", {
          name: `fleet-${r}-${k}`,
          region: "eu-west",
          country: "DE",
          hourlyRateCents: rate,
          maxDeployments: 8,
        });
        const { agent } = await SimAgent.connect(replicas[r]!.url, node.agentToken);
        const agentIndex = agents.push({ agent, replica: r, nodeId: node.node.id, agentToken: node.agentToken }) - 1;
        const other = replicas[(r + 1) % o.replicas]!.url;
        for (let i = 0; (await call(other, "GET", `/nodes/${node.node.id}`)).node.status !== "online"; i++) {
          if (i > 500) throw new Error(`${node.node.id} never online on another replica`);
          await sleep(20);
        }
        for (let j = 0; j < o.deploymentsPerNode; j++) {
          const created = await call(other, "POST", "/deployments", { nodeId: node.node.id, customImage: "busybox:1.36" });
          const cmd = await agent.command(created.deployment.id, "create");
          const d: Dep = { id: created.deployment.id, runSeq: cmd.deployment.runSeq, rate, agentIndex, moved: false, pieces: [] };
          deps.push(d);
          agent.report(cmd.deployment, "pulling");
          agent.report(cmd.deployment, "starting");
          reportRunning(agent, d);
        }
        startBeats(agentIndex);
      }
    for (const d of deps)
      for (let i = 0; (await repos.deployments.get(d.id))?.status !== "running"; i++) {
        if (i > 500) throw new Error(`${d.id} never running`);
        await sleep(20);
      }
    log(`${deps.length} deployments running on ${agents.length} nodes`);

    // Mid-way the last replica dies; each of its agents reconnects to a survivor, as through the load balancer.
    await sleep(o.killAtMs);
    const dead = o.replicas - 1;
    const moving = agents.map((a, k) => ({ ...a, k })).filter((a) => a.replica === dead);
    const reconnectMs: number[] = [];
    const reconnected = moving.map(async ({ agent, k }, i) => {
      await agent.closed;
      const closedAt = Date.now();
      clearInterval(agents[k]!.beats);
      for (const d of deps.filter((x) => x.agentIndex === k)) {
        const piece = d.pieces.at(-1)!;
        piece.untilMs = lastBeat.get(agent)!;
        piece.lowerMs = piece.untilMs - DEAD_SLACK_MS;
        d.moved = true;
      }
      const to = i % (o.replicas - 1);
      const back = await SimAgent.connect(replicas[to]!.url, agents[k]!.agentToken);
      reconnectMs.push(Date.now() - closedAt);
      agents[k] = { ...agents[k]!, agent: back.agent, replica: to, beats: undefined };
      for (const d of deps.filter((x) => x.agentIndex === k)) reportRunning(back.agent, d);
      startBeats(k);
    });
    replicas[dead]!.program.signal("SIGKILL");
    await replicas[dead]!.program.exited;
    await Promise.all(reconnected);
    log(`killed replica ${replicas[dead]!.name}; its ${moving.length} agents back on the others in ${Math.max(...reconnectMs)} ms at most`);

    await sleep(o.runMs - o.killAtMs);
    // Every deployment is still charged as it runs: none further behind now than a tick, a beat and a loaded second.
    const lags = new Map<string, number>();
    const lagAt = Date.now();
    for (const d of deps) lags.set(d.id, lagAt - ((await repos.deployments.get(d.id))?.billedUntil ?? 0));

    // Stopped through the replica holding the agent: charged up to the moment it is asked.
    await Promise.all(
      deps.map(async (d) => {
        const a = agents[d.agentIndex]!;
        const piece = d.pieces.at(-1)!;
        piece.lowerMs = Date.now();
        const stopping = a.agent.command(d.id, "stop");
        await call(replicas[a.replica]!.url, "POST", `/deployments/${d.id}/stop`);
        piece.untilMs = Date.now();
        a.agent.report(await stopping.then((c) => c.deployment), "stopped");
      }),
    );
    for (const d of deps)
      for (let i = 0; (await repos.deployments.get(d.id))?.status !== "stopped"; i++) {
        if (i > 500) throw new Error(`${d.id} never stopped`);
        await sleep(20);
      }

    const deployments: MeteredDeployment[] = [];
    for (const d of deps) {
      const row = (await repos.deployments.get(d.id))!;
      const rows = await sql<{ amount_micro: string; description: string }[]>`
        select amount_micro, description from credit_transactions where deployment_id = ${d.id} and type = 'usage'`;
      deployments.push({
        id: d.id,
        rate: d.rate,
        moved: d.moved,
        billedMs: row.billedMs,
        totalCostMicro: row.totalCostMicro,
        exactMicro: costMicro(d.rate, row.billedMs),
        ledgerMicro: -rows.reduce((s, x) => s + Number(x.amount_micro), 0),
        charges: rows.length,
        describedMs: Math.round(rows.reduce((s, x) => s + Number(/: ([\d.]+) s at /.exec(x.description)?.[1] ?? Number.NaN) * 1000, 0)),
        provenMaxMs: d.pieces.reduce((s, p) => s + (p.untilMs - p.fromMs), 0),
        provenMinMs: d.pieces.reduce((s, p) => s + Math.max(0, p.lowerMs - p.fromMs), 0),
        lagMs: lags.get(d.id)!,
      });
    }

    const { broken } = await wholeBooks(repos);
    const balance = await repos.ledger.balance(userId);
    const sumOfRows = await repos.ledger.sumOfRows(userId);
    if (balance.balanceMicro !== sumOfRows) broken.push(`the tenant's balance is the sum of its rows: ${balance.balanceMicro} != ${sumOfRows}`);
    const { rows: mine } = await repos.deployments.list({ userId, page: 1, limit: 100 });
    const held = mine.reduce((s, x) => s + x.reservedMicro, 0);
    if (balance.reservedMicro !== held) broken.push(`the tenant's holds add up: ${balance.reservedMicro} != ${held}`);
    return {
      deployments,
      killed: { replica: replicas[dead]!.name, agents: moving.length, reconnectMs },
      broken,
      seconds: (performance.now() - t0) / 1000,
    };
  } finally {
    for (const a of agents) {
      clearInterval(a.beats);
      a.agent.ws.terminate();
    }
    for (const r of replicas) await r?.program.stop();
    await sql.end();
    await repos.handle.close();
    await made.drop();
  }
}
