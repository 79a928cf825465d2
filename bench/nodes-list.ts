/**
 * Question: how fast does the public catalogue answer GET /nodes with filters
 * over 10,000 nodes, on SQLite and on PostgreSQL, next to a bare Hono serving
 * the very same bodies (the same-body floor: routing and sending those bytes,
 * nothing else) on the same machine in the same run?
 *
 *   npx tsx bench/nodes-list.ts            (DURATION_MS=4000 ROUNDS=3 CONCURRENCY=16; --quick: 2 rounds of 2 s)
 *   PROF_DIR=/tmp/prof npx tsx bench/nodes-list.ts   (a CPU profile of each server)
 *
 * Goal: at least 0.57 of the same-body floor's rate (aim 0.8), p99 under 10 ms,
 * on both databases. The three servers stay up and take turns for ROUNDS
 * rounds; medians are compared, as a 2-core machine drifts from minute to minute.
 */
import { fork } from "node:child_process";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { quick, reportFigures } from "./lib/figures";
import { fmt, type LoadResult, load } from "./lib/load";
import { median } from "./lib/median";

const durationMs = Number(process.env.DURATION_MS ?? (quick ? 2000 : 4000));
const rounds = Number(process.env.ROUNDS ?? (quick ? 2 : 3));
const concurrency = Number(process.env.CONCURRENCY ?? 16);
const RATIO_GOAL = 0.57;
const P99_GOAL_MS = 10;
const server = fileURLToPath(new URL("./lib/nodes-list-server.ts", import.meta.url));

type Server = { url: string; stop(): void };
function startServer(kind: string, bodies?: Record<string, string>): Promise<Server> {
  const prof = process.env.PROF_DIR ? ["--cpu-prof", `--cpu-prof-dir=${process.env.PROF_DIR}/${kind}`] : [];
  return new Promise((resolve, reject) => {
    const child = fork(server, [kind], { execArgv: ["--import", "tsx", ...prof], stdio: ["ignore", "inherit", "inherit", "ipc"] });
    if (bodies) child.send({ bodies });
    // SIGINT lets --cpu-prof write its profile; the servers end on it.
    child.once("message", (m: { url: string }) => resolve({ url: m.url, stop: () => child.kill("SIGINT") }));
    child.once("exit", (code) => reject(new Error(`${kind} server exited ${code}`)));
  });
}

const queries = [
  "/nodes",
  "/nodes?status=online",
  "/nodes?hasGpu=true&minGpuVram=24000",
  "/nodes?region=eu-west&maxHourlyRate=120",
  "/nodes?minCpuCores=16&minRamMb=64000&page=3",
  "/nodes?hasGpu=true&region=us-east&status=online&limit=50",
];
const pick = (i: number) => queries[i % queries.length]!;

console.log(
  `GET /nodes over 10,000 nodes; ${concurrency} clients, ${rounds} rounds of ${durationMs} ms each; ${os.cpus().length} cores, ${os.cpus()[0]?.model}`,
);
const servers: Record<string, Server> = {};
try {
  const started = await Promise.allSettled(["sqlite", "postgres"].map((kind) => startServer(kind)));
  for (const [i, kind] of ["sqlite", "postgres"].entries()) {
    const r = started[i]!;
    if (r.status === "fulfilled") servers[kind] = r.value;
    else console.log(`${kind.padEnd(10)} skipped: ${(r.reason as Error).message}`);
  }
  const first = servers.sqlite ?? servers.postgres;
  if (!first) throw new Error("no database server started");
  // The floor serves, for each query, the bytes a database server answers it with.
  const bodies: Record<string, string> = {};
  for (const q of queries) bodies[q] = await (await fetch(first.url + q)).text();
  const sizes = Object.values(bodies).map((b) => b.length);
  console.log(`bodies ${Math.min(...sizes)}-${Math.max(...sizes)} bytes (median ${median(sizes)})`);
  servers["same-body floor"] = await startServer("same-body", bodies);

  const kinds = ["same-body floor", ...Object.keys(servers).filter((k) => k !== "same-body floor")];
  for (const kind of kinds) await load(servers[kind]!.url, pick, { concurrency, durationMs: 1000 }); // warm-up
  const seen: Record<string, LoadResult[]> = Object.fromEntries(kinds.map((k) => [k, []]));
  for (let round = 1; round <= rounds; round++) {
    for (const kind of kinds) seen[kind]!.push(await load(servers[kind]!.url, pick, { concurrency, durationMs }));
    console.log(`round ${round}: ${kinds.map((k) => `${k} ${seen[k]!.at(-1)!.rps.toFixed(0)}`).join(", ")} req/s`);
  }
  const rps = (kind: string) => median(seen[kind]!.map((r) => r.rps));
  const p99 = (kind: string) => median(seen[kind]!.map((r) => r.p99Ms));
  for (const kind of kinds)
    console.log(
      `${kind.padEnd(16)} median ${rps(kind).toFixed(0).padStart(6)} req/s, p99 ${p99(kind).toFixed(2)} ms (last round: ${fmt(seen[kind]!.at(-1)!)})`,
    );
  const floor = rps("same-body floor");
  const figures = [];
  for (const kind of kinds.slice(1)) {
    const ratio = rps(kind) / floor;
    console.log(
      `${kind.padEnd(16)} ${ratio.toFixed(2)} of the same-body floor (goal >= ${RATIO_GOAL}); p99 ${p99(kind).toFixed(2)} ms (goal < ${P99_GOAL_MS} ms)`,
    );
    figures.push(
      { name: `${kind} / same-body floor`, value: ratio, goal: RATIO_GOAL, better: "higher" as const },
      { name: `${kind} p99`, value: p99(kind), goal: P99_GOAL_MS, better: "lower" as const, unit: "ms" },
    );
  }
  reportFigures("catalogue", figures);
} finally {
  for (const s of Object.values(servers)) s.stop();
}
