/**
 * P6 (issue 28): how long the control plane takes from its process starting to `/health`
 * answering, with 10,000 nodes in its database (SQLite, already migrated), built (the
 * release's bundle run by `node`) against from the sources (`node --import tsx`, what
 * `npm start` runs). Baseline in the same run: `node -e` serving `/health` on a bare
 * http server, the floor of any Node server's start. RUNS each, alternated, medians.
 *
 *   npx tsx bench/control-plane-start.ts          (RUNS=7, NODES=10000)
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { testConfig } from "../apps/control-plane/src/config";
import { createDeps } from "../apps/control-plane/src/deps";
import { createLogger } from "../apps/control-plane/src/services/logger";
import { freePort } from "../apps/control-plane/test/faults/support/pg-cluster";
import { buildApp } from "../scripts/build";
import { median } from "./lib/median";
import { seedNodes } from "./lib/seed-nodes";

const RUNS = Number(process.env.RUNS ?? 7);
const NODES = Number(process.env.NODES ?? 10_000);
const root = resolve(import.meta.dirname, "..");
const dir = mkdtempSync(join(tmpdir(), "cm-bench-cp-start-"));
const db = `file:${join(dir, "cp.db")}`;

let t = Date.now();
const deps = await createDeps(testConfig({ DATABASE_URL: db, LOG_LEVEL: "silent" }), { log: createLogger("silent") });
await seedNodes(deps, NODES);
await deps.close();
process.stdout.write(`seeded ${NODES} nodes in ${((Date.now() - t) / 1000).toFixed(1)} s\n`);
t = Date.now();
// Where `npm run build` puts it: its database drivers are found in the checkout's node_modules, as a release's beside it.
const { file: bundle } = await buildApp("control-plane");
process.stdout.write(`built in ${((Date.now() - t) / 1000).toFixed(1)} s\n`);

const BARE = `require("node:http").createServer((q, r) => r.end('{"status":"ok"}')).listen(Number(process.env.PORT), "127.0.0.1")`;
const cases: [string, string[]][] = [
  ["node -e (bare http server)", ["-e", BARE]],
  ["built: node lib/control-plane.mjs", [bundle]],
  ["sources: node --import tsx src/index.ts", ["--import", "tsx", join(root, "apps/control-plane/src/index.ts")]],
];

/** ms from spawn to the first 200 from /health. */
async function once(args: string[]): Promise<number> {
  const port = await freePort();
  const started = performance.now();
  const child: ChildProcess = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, PORT: String(port), DATABASE_URL: db, LOG_LEVEL: "silent" },
    stdio: "ignore",
  });
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${args.join(" ")} exited ${child.exitCode}`);
      const ok = await fetch(`http://127.0.0.1:${port}/health`)
        .then((r) => r.ok)
        .catch(() => false);
      if (ok) return performance.now() - started;
      await new Promise((r) => setTimeout(r, 5));
    }
  } finally {
    child.kill("SIGKILL");
    await new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once("exit", r)));
  }
}

const times = new Map<string, number[]>(cases.map(([name]) => [name, []]));
await once(cases[1]![1]); // the first start migrates nothing, but warms the page cache for all
for (let i = 0; i < RUNS; i++) for (const [name, args] of cases) times.get(name)!.push(await once(args));

const base = median(times.get(cases[0]![0])!);
const tsx = median(times.get(cases[2]![0])!);
process.stdout.write(`\n${RUNS} runs each, medians, ${NODES} nodes in SQLite\n`);
for (const [name] of cases) {
  const m = median(times.get(name)!);
  process.stdout.write(`${name.padEnd(42)} ${m.toFixed(0).padStart(6)} ms  ${(m / base).toFixed(2)}x bare  ${(m / tsx).toFixed(2)}x tsx\n`);
}
rmSync(dir, { recursive: true, force: true });
