/**
 * Question: how long from POST /deployments to `running`, next to creating and
 * starting the same local image with Docker directly (dockerode, same engine,
 * same run)? Goal: at most 1.3 times the raw Docker time.
 *
 *   npx tsx bench/deploy.ts              (RUNS=8)
 */
import Docker from "dockerode";
import { ensureWebImage } from "../apps/control-plane/test/e2e/support/web-image";
import { startProcesses } from "./lib/system-procs";

const RUNS = Number(process.env.RUNS ?? 8);
const image = ensureWebImage();
const docker = new Docker();
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

// Baseline: what any runner must do at least: create, start, until Docker says running.
const raw: number[] = [];
for (let i = 0; i < RUNS; i++) {
  const t0 = performance.now();
  const c = await docker.createContainer({ Image: image, Labels: { "cm.bench": "deploy" }, HostConfig: { Init: true } });
  await c.start();
  raw.push(performance.now() - t0);
  await c.remove({ force: true });
}

const s = await startProcesses();
const ours: number[] = [];
try {
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    const r = await s.call("POST", "/deployments", { nodeId: s.nodeId, customImage: image, ports: [8080] });
    for (;;) {
      const d = (await s.call("GET", `/deployments/${r.deployment.id}`)).deployment;
      if (d.status === "running") break;
      if (d.status === "failed") throw new Error(d.statusReason);
      await new Promise((res) => setTimeout(res, 5));
    }
    ours.push(performance.now() - t0);
    await s.call("DELETE", `/deployments/${r.deployment.id}`);
  }
  await new Promise((res) => setTimeout(res, 3000));
} finally {
  s.stop();
}
console.log(`raw docker create+start: median ${median(raw).toFixed(0)} ms (${raw.map((x) => x.toFixed(0)).join(", ")})`);
console.log(`POST /deployments -> running: median ${median(ours).toFixed(0)} ms (${ours.map((x) => x.toFixed(0)).join(", ")})`);
console.log(`ratio: ${(median(ours) / median(raw)).toFixed(2)} (goal <= 1.3)`);
process.exit(0);
