/**
 * The benchmarks' guard: short runs of the deploy, catalogue, logs, endpoint
 * and replica-commands benchmarks, each figure printed beside its goal. It fails only where a figure
 * is worse than twice its goal (a ratio of 1.3 at most fails past 2.6, one of
 * 0.57 at least below 0.285), or where a benchmark could not run: a regression
 * like issue 38's (deploy at 2.35, the catalogue at 0.28), not a noisy run.
 *
 *   npm run bench:check               (about 2 minutes on 2 cores; Docker and TEST_POSTGRES_URL as for the tests)
 *   npm run bench:check -- logs deploy   (only those)
 *
 * Exit codes: 0 every figure within twice its goal; 1 one past it, or a
 * benchmark that failed or reported nothing.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { FIGURES_PREFIX, type Figure } from "./lib/figures";

const BENCHES = {
  deploy: "deploy.ts",
  catalogue: "nodes-list.ts",
  logs: "logs.ts",
  endpoints: "endpoints.ts",
  "replica-commands": "replica-commands.ts",
} as const;
type Bench = keyof typeof BENCHES;
const asked = process.argv.slice(2).filter((a): a is Bench => a in BENCHES);
const unknown = process.argv.slice(2).filter((a) => !(a in BENCHES));
if (unknown.length > 0) {
  console.error(`bench:check: no benchmark ${unknown.join(", ")}; there are ${Object.keys(BENCHES).join(", ")}`);
  process.exit(2);
}

/** Runs one benchmark's --quick mode, its lines passed through (the CI log keeps them), and collects what it reports. */
function run(bench: Bench): Promise<{ figures: Figure[]; problem?: string; seconds: number }> {
  const started = performance.now();
  const script = fileURLToPath(new URL(BENCHES[bench], import.meta.url));
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", script, "--quick"], {
      env: { ...process.env, BENCH_FIGURES: "1" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    const figures: Figure[] = [];
    let rest = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      const lines = (rest + chunk).split("\n");
      rest = lines.pop()!;
      for (const line of lines) {
        if (line.startsWith(FIGURES_PREFIX)) figures.push(...(JSON.parse(line.slice(FIGURES_PREFIX.length)) as { figures: Figure[] }).figures);
        else console.log(`  ${bench}: ${line}`);
      }
    });
    child.on("close", (code, signal) => {
      const seconds = (performance.now() - started) / 1000;
      if (code !== 0) resolve({ figures, seconds, problem: `exited with ${signal ?? code}` });
      else if (figures.length === 0) resolve({ figures, seconds, problem: "reported no figures" });
      else resolve({ figures, seconds });
    });
  });
}

/** Twice the goal, the way that is worse: a ratio of 1.3 at most fails past 2.6; one of 0.57 at least fails below 0.285. */
const failsPast = (f: Figure) => (f.better === "lower" ? f.goal * 2 : f.goal / 2);
const verdict = (f: Figure) => {
  if (!Number.isFinite(f.value)) return "FAIL";
  const within = f.better === "lower" ? f.value <= f.goal : f.value >= f.goal;
  if (within) return "ok";
  return (f.better === "lower" ? f.value > failsPast(f) : f.value < failsPast(f)) ? "FAIL" : "below goal";
};
const number = (x: number) => (Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(2));

const rows: string[][] = [];
const problems: string[] = [];
for (const bench of asked.length > 0 ? asked : (Object.keys(BENCHES) as Bench[])) {
  console.log(`== ${bench} (bench/${BENCHES[bench]} --quick)`);
  const r = await run(bench);
  console.log(`== ${bench}: ${r.seconds.toFixed(0)} s`);
  if (r.problem) problems.push(`${bench} ${r.problem}`);
  for (const f of r.figures) {
    const unit = f.unit ? ` ${f.unit}` : "";
    const sign = f.better === "lower" ? "<=" : ">=";
    rows.push([
      bench,
      f.name,
      `${number(f.value)}${unit}`,
      `${sign} ${number(f.goal)}${unit}`,
      `${f.better === "lower" ? ">" : "<"} ${number(failsPast(f))}${unit}`,
      verdict(f),
    ]);
  }
}

const header = ["bench", "figure", "measured", "goal", "fails", "verdict"];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join("  ");
console.log(`\n${line(header)}`);
for (const r of rows) console.log(line(r));
for (const p of problems) console.log(`FAIL: ${p}`);
const failed = rows.filter((r) => r[5] === "FAIL").length + problems.length;
console.log(failed === 0 ? "bench:check: every figure within twice its goal" : `bench:check: ${failed} past twice the goal or not measured`);
process.exit(failed === 0 ? 0 : 1);
