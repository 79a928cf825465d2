/**
 * Question (issue 41, P8): what does a command cost when the tenant talks to a
 * control-plane replica other than the one holding the node's agent session,
 * next to the holder's own path, in the same run? Two replicas on one
 * PostgreSQL database, each a process of its own; a protocol-level agent (the
 * test suite's SimAgent, a real `ws` client speaking the wire frames) in this
 * process, connected to replica A. Each round creates a deployment and stops it
 * (then deletes it) on A, then the same on B, alternating; the time measured is
 * from the API call leaving here to the agent receiving the command frame.
 *
 *   npx tsx bench/replica-commands.ts            (ROUNDS=40; needs TEST_POSTGRES_URL)
 *   npx tsx bench/replica-commands.ts --quick    (10 rounds)
 *
 * Goal: the median through another replica under 100 ms more than through the holder.
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createPgDatabase } from "@cm/db/testing";
import { SimAgent } from "../apps/control-plane/test/agents/support/sim-agent";
import { freePort } from "../apps/control-plane/test/faults/support/pg-cluster";
import { commandRounds, p95, summary } from "./lib/command-rounds";
import { quick, reportFigures } from "./lib/figures";
import { median } from "./lib/median";

const rounds = Number(process.env.ROUNDS ?? (quick ? 10 : 40));
const warmup = 3;

type Info = { url: string; agentToken?: string; nodeId?: string; tenantToken?: string };
const db = await createPgDatabase();
const children: ChildProcess[] = [];
const replica = async (seed: boolean): Promise<Info> => {
  const child = fork(fileURLToPath(new URL("./lib/replica-plane.ts", import.meta.url)), [], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    env: {
      ...process.env,
      REPLICA_PORT: String(await freePort()),
      REPLICA_DB_URL: db.url,
      REPLICA_SECRET: "bench-replicas-secret-0123456789abcdef",
      REPLICA_SEED: seed ? "1" : "0",
    },
  });
  children.push(child);
  return new Promise<Info>((resolve, reject) => {
    child.once("message", (m) => resolve(m as Info));
    child.once("exit", (c) => reject(new Error(`replica exited ${c}`)));
  });
};
const [a, b] = [await replica(true), await replica(false)];
const { agent } = await SimAgent.connect(a.url, a.agentToken!);
// The harness's heartbeat interval is 10 s: the node stays online with a beat every 2 s.
const beats = setInterval(() => agent.heartbeat(), 2000);

const round = commandRounds(agent, a.nodeId!, a.tenantToken!);

const times = { holder: [] as number[], other: [] as number[] };
try {
  for (let i = 0; i < warmup + rounds; i++) {
    const onA = await round(a.url);
    const onB = await round(b.url);
    if (i < warmup) continue;
    times.holder.push(...onA);
    times.other.push(...onB);
  }
  const added = median(times.other) - median(times.holder);
  console.log(`replica-commands: ${rounds} rounds, a create and a stop on each replica per round`);
  console.log(`  on the holder's replica (A):      ${summary(times.holder)}`);
  console.log(`  on another replica (B, NOTIFY):   ${summary(times.other)}`);
  console.log(
    `  ratio of medians ${(median(times.other) / median(times.holder)).toFixed(2)}, p95s ${(p95(times.other) / p95(times.holder)).toFixed(2)}; ` +
      `median added ${added.toFixed(1)} ms (${added < 100 ? "under" : "OVER"} the 100 ms goal)`,
  );
  reportFigures("replica-commands", [{ name: "command through another replica: median added", value: added, goal: 100, better: "lower", unit: "ms" }]);
} finally {
  clearInterval(beats);
  await agent.close();
  for (const c of children) c.kill("SIGTERM");
  await Promise.all(children.map((c) => new Promise((resolve) => (c.exitCode !== null ? resolve(null) : c.once("exit", resolve)))));
  await db.drop();
}
process.exit(0);
