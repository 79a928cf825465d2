/**
 * Question: how fast does the public catalogue answer GET /nodes with filters
 * over 10,000 nodes, on SQLite and on PostgreSQL, next to a bare Hono
 * hello-world on the same machine in the same run?
 *
 *   npx tsx bench/nodes-list.ts            (DURATION_MS, CONCURRENCY to change)
 *
 * Goal: at least 30% of the bare-Hono rate on SQLite, p99 under 25 ms.
 */
import { fork } from "node:child_process";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { fmt, load } from "./lib/load";

const durationMs = Number(process.env.DURATION_MS ?? 8000);
const concurrency = Number(process.env.CONCURRENCY ?? 16);
const server = fileURLToPath(new URL("./lib/nodes-list-server.ts", import.meta.url));

function startServer(kind: string): Promise<{ url: string; stop(): void }> {
  return new Promise((resolve, reject) => {
    const child = fork(server, [kind], { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
    child.once("message", (m: { url: string }) => resolve({ url: m.url, stop: () => child.kill() }));
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

console.log(`GET /nodes over 10,000 nodes; ${concurrency} clients for ${durationMs} ms each; ${os.cpus().length} cores, ${os.cpus()[0]?.model}`);
const results: Record<string, Awaited<ReturnType<typeof load>>> = {};
for (const kind of ["bare-hono", "sqlite", "postgres"]) {
  let s: Awaited<ReturnType<typeof startServer>>;
  try {
    s = await startServer(kind);
  } catch (err) {
    console.log(`${kind.padEnd(10)} skipped: ${(err as Error).message}`);
    continue;
  }
  await load(s.url, kind === "bare-hono" ? () => "/" : pick, { concurrency, durationMs: 1000 }); // warm-up
  results[kind] = await load(s.url, kind === "bare-hono" ? () => "/" : pick, { concurrency, durationMs });
  s.stop();
  console.log(`${kind.padEnd(10)} ${fmt(results[kind]!)}`);
}
const base = results["bare-hono"]!.rps;
for (const kind of ["sqlite", "postgres"]) {
  const r = results[kind];
  if (r)
    console.log(
      `${kind.padEnd(10)} ${((r.rps / base) * 100).toFixed(1)}% of bare Hono; p99 ${r.p99Ms.toFixed(2)} ms ${r.p99Ms < 25 ? "(under 25 ms)" : "(OVER 25 ms)"}`,
    );
}
