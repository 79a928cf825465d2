/**
 * Questions: how many log lines per second go from one container into
 * GET /deployments/:id/logs, and how long after a line is written can a tenant
 * read it? Baseline (same run): `docker logs` reading the same lines straight
 * from the engine. Goals: at least 50,000 lines/s; median delay under 250 ms.
 *
 *   npx tsx bench/logs.ts                (LINES=300000; --quick: 100 lines for the delay instead of 200)
 */
import { execFileSync } from "node:child_process";
import { ensureScriptImage } from "../apps/agent/test/support/script-image";
import { quick, reportFigures } from "./lib/figures";
import { startProcesses } from "./lib/system-procs";

const LINES = Number(process.env.LINES ?? 300_000);
const DELAY_LINES = quick ? 100 : 200;
const image = ensureScriptImage();
const s = await startProcesses();
const created: string[] = [];
const deploy = async (script: string) => {
  const r = await s.call("POST", "/deployments", { nodeId: s.nodeId, customImage: image, env: { SCRIPT: script } });
  created.push(r.deployment.id);
  return r.deployment.id as string;
};
const lastLine = async (id: string) => (await s.call("GET", `/deployments/${id}/logs?tail=1`)).logs[0] as { message: string; timestamp: string } | undefined;

try {
  // Throughput: `seq` writes LINES lines as fast as the container can.
  const id = await deploy(`sleep 1; seq 1 ${LINES}; sleep 3600`);
  let first: number | undefined;
  for (;;) {
    const l = await lastLine(id);
    if (l && first === undefined) first = performance.now();
    if (l?.message === String(LINES)) break;
    await new Promise((r) => setTimeout(r, 2));
  }
  const ingestS = (performance.now() - first!) / 1000;
  const linesPerS = LINES / ingestS;
  const cid = execFileSync("docker", ["ps", "-q", "--filter", `label=cm.deployment-id=${id}`], { encoding: "utf8" }).trim();
  const t0 = performance.now();
  const n = execFileSync("sh", ["-c", `docker logs ${cid} | wc -l`], { encoding: "utf8", maxBuffer: 1 << 30 }).trim();
  const dockerS = (performance.now() - t0) / 1000;
  console.log(
    `throughput: ${LINES} lines into the API in ${ingestS.toFixed(2)} s = ${linesPerS.toFixed(0)} lines/s; docker logs read ${n} lines at ${(Number(n) / dockerS).toFixed(0)} lines/s (ratio ${(linesPerS / (Number(n) / dockerS)).toFixed(2)})`,
  );

  // Delay: one line every 20 ms; poll the API and note when each first shows.
  const id2 = await deploy(`sleep 1; i=0; while [ $i -lt ${DELAY_LINES + 50} ]; do echo "t $i"; i=$((i+1)); sleep 0.02; done; sleep 3600`);
  const delays: number[] = [];
  let seen = 0;
  while (seen < DELAY_LINES) {
    const logs = (await s.call("GET", `/deployments/${id2}/logs?tail=1000`)).logs as Array<{ timestamp: string }>;
    for (const l of logs.slice(seen)) delays.push(Date.now() - Date.parse(l.timestamp));
    seen = Math.max(seen, logs.length);
    await new Promise((r) => setTimeout(r, 2));
  }
  delays.sort((a, b) => a - b);
  const q = (p: number) => delays[Math.floor(p * (delays.length - 1))];
  console.log(`delay from write to readable: median ${q(0.5)} ms, p90 ${q(0.9)} ms, max ${delays.at(-1)} ms (${delays.length} lines)`);
  reportFigures("logs", [
    { name: "lines/s into the API", value: linesPerS, goal: 50_000, better: "higher" },
    { name: "median delay to readable", value: q(0.5)!, goal: 250, better: "lower", unit: "ms" },
  ]);
} finally {
  for (const id of created) await s.call("DELETE", `/deployments/${id}`).catch(() => undefined);
  await new Promise((r) => setTimeout(r, 3000));
  await s.stop();
}
process.exit(0);
