/**
 * Question: how long does `cm` take to start and answer, next to Node itself?
 * Baseline (same run): `node -e 0`. Goal: `cm --version` and `cm nodes --json`
 * at most 4x the baseline. Measured two ways: from a checkout (`tsx
 * apps/cli/src/index.ts`, what `npm run cm` runs, TypeScript compiled on the fly)
 * and as one bundled file (`node cm.mjs`, what an installed CLI would ship).
 * The chain libraries are never loaded by these commands (web3.js is imported
 * only by `credits buy`).
 *
 *   npx tsx bench/cli-startup.ts            (RUNS=15)
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { build } from "esbuild";
import { testConfig } from "../apps/control-plane/src/config";
import { createDeps } from "../apps/control-plane/src/deps";
import { startServer } from "../apps/control-plane/src/server";
import { createLogger } from "../apps/control-plane/src/services/logger";
import { median } from "./lib/median";
import { seedNodes } from "./lib/seed-nodes";

const run = promisify(execFile);
const RUNS = Number(process.env.RUNS ?? 15);
const root = resolve(import.meta.dirname, "..");
const dir = mkdtempSync(join(tmpdir(), "cm-bench-cli-"));
const deps = await createDeps(testConfig({ DATABASE_URL: `file:${join(dir, "cp.db")}`, LOG_LEVEL: "silent" }), { log: createLogger("silent") });
await seedNodes(deps, 100);
const server = await startServer(deps, { port: 0, host: "127.0.0.1" });

const bundle = join(dir, "cm.mjs");
await build({
  entryPoints: [join(root, "apps/cli/src/index.ts")],
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  outfile: bundle,
  // Loaded on demand by `credits buy` only; an installed CLI would depend on them.
  external: ["@solana/web3.js"],
  logLevel: "error",
});

const env = { ...process.env, HOME: dir, XDG_CONFIG_HOME: dir, CM_API_URL: server.url };
const tsx = join(root, "node_modules/.bin/tsx");
const entry = join(root, "apps/cli/src/index.ts");
const cases: Array<[string, string, string[]]> = [
  ["node -e 0", process.execPath, ["-e", "0"]],
  // The floors under the two ways: tsx compiling nothing, and Node's own fetch of the same page.
  ["tsx -e 0", tsx, ["-e", "0"]],
  ["node: fetch /nodes", process.execPath, ["-e", `fetch("${server.url}/nodes").then((r) => r.text()).then(console.log)`]],
  ["cm --version (tsx)", tsx, [entry, "--version"]],
  ["cm nodes --json (tsx)", tsx, [entry, "nodes", "--json"]],
  ["cm --version (bundled)", process.execPath, [bundle, "--version"]],
  ["cm nodes --json (bundled)", process.execPath, [bundle, "nodes", "--json"]],
];
const times = new Map(cases.map(([name]) => [name, [] as number[]]));
try {
  // Interleaved, so a busy moment of the machine falls on every case alike.
  for (let i = 0; i < RUNS + 1; i++) {
    for (const [name, cmd, args] of cases) {
      const t0 = performance.now();
      // Async: the control plane answering `cm nodes` lives in this process's event loop.
      await run(cmd, args, { env, cwd: root, maxBuffer: 1 << 26 });
      if (i > 0) times.get(name)!.push(performance.now() - t0); // the first round warms the file cache
    }
  }
  const base = median(times.get("node -e 0")!);
  console.log(`${RUNS} runs each, medians, ${server.url} with 100 nodes (a page of 20 answered)`);
  for (const [name] of cases) {
    const m = median(times.get(name)!);
    console.log(`${name.padEnd(28)} ${m.toFixed(0).padStart(5)} ms   ${(m / base).toFixed(2)}x node -e 0`);
  }
} finally {
  await server.close();
  await deps.close();
  rmSync(dir, { recursive: true, force: true });
}
