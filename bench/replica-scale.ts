/**
 * Question (issue 41): what do three control-plane replicas on one PostgreSQL
 * database cost holding AGENTS simulated agents between them (as
 * bench/fan-in.ts does for one), and how late is a command at that load?
 * Reported: each replica's resident memory and CPU, PostgreSQL's CPU (its
 * processes, from /proc) and its writes (pg_stat_database for the bench's
 * database: commits and rows written a second; WAL bytes a second, which are
 * the whole cluster's), and command latency (create and stop, API call to the
 * agent's frame) on the replica holding the agent and on another, idle and
 * loaded. pg_stat_statements is used where it is preloaded.
 *
 *   npx tsx bench/replica-scale.ts            (AGENTS=30000 WINDOW_S=30 CONNECTS_PER_S=600 RAMP_S=300; needs TEST_POSTGRES_URL)
 *   npx tsx bench/replica-scale.ts --quick    (3,000 agents, 10 s windows)
 *
 * Every agent heartbeats every 10 s, phased so the fleet's beats are spread
 * evenly; the agents run in one process per replica, each connected to its
 * replica directly (as a load balancer would spread them), and one whose
 * connection closes tries again within 5 s (full jitter), as the real agent does.
 */
import { type ChildProcess, fork } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { creditsToMicro, openRepos } from "@cm/db";
import { createPgDatabase } from "@cm/db/testing";
import postgres from "postgres";
import { hashSecret } from "../apps/control-plane/src/services/ids";
import { SimAgent } from "../apps/control-plane/test/agents/support/sim-agent";
import { freePort } from "../apps/control-plane/test/faults/support/pg-cluster";
import { newWallet } from "../apps/control-plane/test/support/harness";
import { commandRounds, summary } from "./lib/command-rounds";
import { cpuMicros, rssMb } from "./lib/cpu";
import { quick } from "./lib/figures";
import { jsonChild, stopChild } from "./lib/json-child";
import { median } from "./lib/median";

const agents = Number(process.env.AGENTS ?? (quick ? 3000 : 30_000));
const windowS = Number(process.env.WINDOW_S ?? (quick ? 10 : 30));
const connectsPerS = Number(process.env.CONNECTS_PER_S ?? 600);
const rampS = Number(process.env.RAMP_S ?? 300);
const replicaCount = 3;
const intervalMs = 10_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

console.log(
  `replica-scale: ${replicaCount} replicas, ${agents} agents heartbeating every ${intervalMs / 1000} s; ${windowS} s windows; ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${os.cpus()[0]?.model}`,
);
const db = await createPgDatabase();
const repos = await openRepos(db.url);
const sql = postgres(db.url, { max: 1, onnotice: () => undefined });
const dbName = new URL(db.url).pathname.slice(1);
const children: ChildProcess[] = [];
try {
  // One node per simulated agent, token `bench-agent-<i>` (bench/lib/fake-agents.ts).
  const seedStart = performance.now();
  const owner = await repos.auth.upsertUser("usr_scale", "ScaleOperator111111111111111111111111111111", Date.now());
  for (let i = 0; i < agents; i += 10)
    await Promise.all(
      Array.from({ length: Math.min(10, agents - i) }, (_, k) =>
        repos.nodes.create({
          id: `node_fanin${i + k}`,
          operatorId: owner.id,
          name: `scale-${i + k}`,
          region: "eu-west",
          country: "DE",
          hourlyRateCents: 50,
          maxDeployments: 4,
          agentTokenHash: hashSecret(`bench-agent-${i + k}`),
          createdAt: Date.now(),
        }),
      ),
    );
  console.log(`  seeded ${agents} nodes in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`);

  const replicas = await Promise.all(
    Array.from({ length: replicaCount }, async () => {
      const child = fork(fileURLToPath(new URL("./lib/scale-replica.ts", import.meta.url)), [], {
        execArgv: ["--import", "tsx"],
        stdio: ["ignore", "inherit", "inherit", "ipc"],
        env: { ...process.env, SCALE_PORT: String(await freePort()), SCALE_DB_URL: db.url, SCALE_REPLICA_SECRET: "bench-replicas-secret-0123456789abcdef" },
      });
      children.push(child);
      return new Promise<{ url: string; pid: number }>((resolve, reject) => {
        child.once("message", (m) => resolve(m as { url: string; pid: number }));
        child.once("exit", (c) => reject(new Error(`replica exited ${c}`)));
      });
    }),
  );
  const [a, b] = replicas as [{ url: string; pid: number }, { url: string; pid: number }];

  // A tenant who is also the operator of one more node, whose agent (a SimAgent here) is on replica A.
  const wallet = newWallet();
  const post = async (p: string, body: unknown, token?: string) =>
    (await (
      await fetch(b.url + p, {
        method: "POST",
        headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify(body),
      })
    ).json()) as any;
  const nonce = await post("/auth/nonce", { walletAddress: wallet.address });
  const verified = await post("/auth/verify", { walletAddress: wallet.address, message: nonce.message, signature: wallet.sign(nonce.message) });
  await repos.handle.transaction((tx) =>
    repos.ledger.post(tx, {
      id: `txn_scale_${Date.now()}`,
      userId: verified.user.id,
      type: "deposit",
      amountMicro: creditsToMicro(100_000),
      description: "scale bench grant",
      createdAt: Date.now(),
    }),
  );
  const node = await post(
    "/operator/nodes",
    { name: "commands", region: "eu-west", country: "DE", hourlyRateCents: 10, maxDeployments: 64 },
    verified.accessToken,
  );
  const { agent } = await SimAgent.connect(a.url, node.agentToken);
  const beats = setInterval(() => agent.heartbeat(), 2000);
  const round = commandRounds(agent, node.node.id, verified.accessToken);
  for (let i = 0; (await (await fetch(`${b.url}/nodes/${node.node.id}`)).json()).node.status !== "online"; i++) {
    if (i > 200) throw new Error("the commands' node never online on B");
    await sleep(50);
  }

  const pgPids = () => {
    const pids: number[] = [];
    for (const d of readdirSync("/proc"))
      if (/^\d+$/.test(d))
        try {
          if (readFileSync(`/proc/${d}/comm`, "utf8").trim() === "postgres") pids.push(Number(d));
        } catch {}
    return pids;
  };
  // A backend that ends within the window takes its CPU with it; the pools' connections live throughout.
  const pgCpu = () =>
    new Map(
      pgPids().map((p) => {
        try {
          return [p, cpuMicros(p)];
        } catch {
          return [p, 0];
        }
      }),
    );
  const pgStats = async () => {
    const [s] = await sql<{ xacts: string; written: string; wal: string }[]>`
      select xact_commit + xact_rollback as xacts, tup_inserted + tup_updated + tup_deleted as written,
             pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') as wal
      from pg_stat_database where datname = ${dbName}`;
    return { xacts: Number(s!.xacts), written: Number(s!.written), wal: Number(s!.wal) };
  };
  const statements = async () => {
    try {
      return await sql<{ query: string; calls: string; ms: number }[]>`
        select left(regexp_replace(query, '\\s+', ' ', 'g'), 90) as query, calls, total_exec_time as ms
        from pg_stat_statements join pg_database d on d.oid = dbid where d.datname = ${dbName} order by total_exec_time desc limit 5`;
    } catch {
      return undefined;
    }
  };

  /** One window: each replica's CPU and RSS, PostgreSQL's CPU and writes, and command rounds alternating A and B all along. */
  async function window(label: string) {
    const cpu0 = replicas.map((r) => cpuMicros(r.pid));
    const pg0 = pgCpu();
    const st0 = await pgStats();
    const t0 = performance.now();
    const times = { holder: [] as number[], other: [] as number[] };
    while (performance.now() - t0 < windowS * 1000) {
      times.holder.push(...(await round(a.url)));
      times.other.push(...(await round(b.url)));
    }
    const seconds = (performance.now() - t0) / 1000;
    const st1 = await pgStats();
    const pg1 = pgCpu();
    let pgMicros = 0;
    for (const [pid, us] of pg1) pgMicros += us - (pg0.get(pid) ?? 0);
    const perReplica = replicas.map((r, i) => ({ cpuPct: ((cpuMicros(r.pid) - cpu0[i]!) / 1e6 / seconds) * 100, rssMb: rssMb(r.pid) }));
    console.log(`  ${label} (${seconds.toFixed(0)} s):`);
    for (const [i, r] of perReplica.entries()) console.log(`    replica ${"ABC"[i]}: ${r.rssMb.toFixed(0)} MB resident, ${r.cpuPct.toFixed(1)}% of a core`);
    console.log(
      `    PostgreSQL: ${((pgMicros / 1e6 / seconds) * 100).toFixed(1)}% of a core (its ${pg1.size} processes), ${((st1.xacts - st0.xacts) / seconds).toFixed(0)} transactions/s, ` +
        `${((st1.written - st0.written) / seconds).toFixed(0)} rows written/s, ${((st1.wal - st0.wal) / seconds / 1024).toFixed(0)} KB of WAL/s (the cluster's)`,
    );
    console.log(
      `    commands on the holder (A): ${summary(times.holder)}${round.unavailable.count ? ` (${round.unavailable.count} answers 503 so far, each retried after 2 s)` : ""}`,
    );
    console.log(`    commands on another (B):    ${summary(times.other)}; median added ${(median(times.other) - median(times.holder)).toFixed(1)} ms`);
    return { perReplica, times };
  }

  for (let i = 0; i < 3; i++) await round(i % 2 ? b.url : a.url); // warm both paths
  await window("idle: 1 agent");

  type Stats = { connected: number; closed: number; retries: number; beats: number; errors: number; closeCodes: Record<string, number> };
  const stats: Stats[] = [];
  const per = Math.ceil(agents / replicaCount);
  const fakes = replicas.map((r, k) =>
    jsonChild(
      fileURLToPath(new URL("./lib/fake-agents.ts", import.meta.url)),
      [r.url, k * per, Math.min(per, agents - k * per), agents, Math.round(connectsPerS / replicaCount), intervalMs, "retry"],
      (s) => (stats[k] = s),
    ),
  );
  children.push(...fakes);
  const sum = (key: Exclude<keyof Stats, "closeCodes">) => stats.reduce((n, s) => n + (s?.[key] ?? 0), 0);
  const codes = () => {
    const all: Record<string, number> = {};
    for (const x of stats) for (const [c, n] of Object.entries(x?.closeCodes ?? {})) all[c] = (all[c] ?? 0) + n;
    return all;
  };
  const rampStart = performance.now();
  // Past RAMP_S the windows measure what did connect: the largest fleet this machine carried.
  for (let tick = 1, before = 0; sum("connected") < agents; tick++) {
    if (performance.now() - rampStart > rampS * 1000) {
      console.log(`  only ${sum("connected")} of ${agents} agents connected within ${rampS} s: measuring those`);
      break;
    }
    await sleep(1000);
    if (tick % 10 === 0) {
      console.log(
        `  ramp ${tick} s: ${stats.map((x) => x?.connected ?? 0).join(" / ")} connected (${((sum("connected") - before) / 10).toFixed(0)}/s), ${sum("closed")} closed and retried (close codes ${JSON.stringify(codes())}), ${sum("errors")} errors`,
      );
      before = sum("connected");
    }
  }
  const connected = sum("connected");
  console.log(`  ${connected} agents connected in ${((performance.now() - rampStart) / 1000).toFixed(0)} s`);
  // One whole heartbeat interval first, so every agent is in its steady rhythm.
  await sleep(intervalMs + 2000);
  const beats0 = sum("beats");
  const beatsT0 = performance.now();
  await window(`${connected + 1} agents`);
  const beatsPerS = (sum("beats") - beats0) / ((performance.now() - beatsT0) / 1000);
  const online = (await (await fetch(`${b.url}/nodes?status=online&limit=1`)).json()).pagination.total;
  console.log(
    `    ${beatsPerS.toFixed(0)} heartbeats/s, ${online} nodes online (read on B), ${sum("closed")} connections closed and retried in all, ${sum("errors")} errors`,
  );
  const top = await statements();
  if (top) for (const s of top) console.log(`    pg_stat_statements: ${Number(s.ms).toFixed(0)} ms in ${s.calls} calls: ${s.query}`);
  else console.log("    pg_stat_statements: not preloaded on this server");
  clearInterval(beats);
  await agent.close();
} finally {
  await Promise.all(children.map(stopChild));
  await sql.end();
  await repos.handle.close();
  await db.drop();
}
process.exit(0);
