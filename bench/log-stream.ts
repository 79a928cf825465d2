/**
 * Question: how long after a container's line leaves its node does a tenant
 * following GET /deployments/:id/logs/stream read it, with 1 follower and with
 * 1,000 following the same deployment on one control plane? Baseline (same run,
 * same lines): the plain GET /deployments/:id/logs polled back to back, the best
 * a client without the stream can do. Goals: median under 150 ms; 1,000
 * followers keep it under 500 ms.
 *
 * The control plane runs in its own process (SQLite file database), the
 * followers in another; this process is the node's agent on a real agent
 * WebSocket, sending one line per logs frame every INTERVAL_MS, each stamped
 * with the wall-clock millisecond it was sent, and the poller.
 *
 *   npx tsx bench/log-stream.ts              (LINES=100 INTERVAL_MS=100 FOLLOWERS=1000;
 *                                             PROF_DIR=dir writes the control plane's CPU profile there)
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Deployment } from "@cm/protocol";
import { SimAgent } from "../apps/control-plane/test/agents/support/sim-agent";
import type { Plane } from "./lib/system-procs";

const LINES = Number(process.env.LINES ?? 100);
const INTERVAL_MS = Number(process.env.INTERVAL_MS ?? 100);
const FOLLOWERS = Number(process.env.FOLLOWERS ?? 1000);

const child = (file: string, profile = false) =>
  fork(fileURLToPath(new URL(file, import.meta.url)), [], {
    execArgv: ["--import", "tsx", ...(profile && process.env.PROF_DIR ? ["--cpu-prof", `--cpu-prof-dir=${process.env.PROF_DIR}`] : [])],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
const message = <T>(p: ChildProcess) =>
  new Promise<T>((resolve, reject) => {
    p.once("message", (m) => resolve(m as T));
    p.once("exit", (code) => reject(new Error(`child exited ${code}`)));
  });

const plane = child("./lib/endpoint-plane.ts", true);
const info = await message<Plane>(plane);
const api = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
  const r = await fetch(info.url + path, {
    method,
    headers: { authorization: `Bearer ${info.tenantToken}`, "content-type": "application/json" },
    body: body ? JSON.stringify(body) : undefined,
  });
  return (await r.json()) as T;
};
const { agent } = await SimAgent.connect(info.url, info.agentToken);
// The control plane's offline monitor wants a heartbeat every 10 s.
const beats = setInterval(() => agent.heartbeat(), 3_000);

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;
const ms = (x: number) => `${x} ms`;

/** One round: a running deployment, `followers` on its stream, LINES lines, and the poller beside them. */
async function round(followers: number) {
  const { deployment } = await api<{ deployment: Deployment }>("POST", "/deployments", { nodeId: info.nodeId, customImage: "busybox:1.36" });
  const id = deployment.id;
  const { deployment: spec } = await agent.command(id, "create");
  for (const s of ["pulling", "starting", "running"]) agent.report(spec, s);
  while ((await api<{ deployment: Deployment }>("GET", `/deployments/${id}`)).deployment.status !== "running") await new Promise((r) => setTimeout(r, 20));

  const f = child("./lib/sse-followers.ts");
  f.send({ url: info.url, token: info.tenantToken, deploymentId: id, count: followers });
  await message<{ ready: number }>(f);

  // The baseline: the plain logs route read back to back; a line counts when it first shows.
  const sentAt = new Map<number, number>();
  const pollDelays: number[] = [];
  let polling = true;
  const poller = (async () => {
    const seen = new Set<number>();
    while (polling) {
      const { logs } = await api<{ logs: Array<{ message: string }> }>("GET", `/deployments/${id}/logs?tail=20`);
      const now = Date.now();
      for (const l of logs) {
        const n = Number(l.message.split(" ")[0]);
        if (!seen.has(n) && sentAt.has(n)) {
          seen.add(n);
          pollDelays.push(now - sentAt.get(n)!);
        }
      }
    }
  })();

  for (let n = 1; n <= LINES; n++) {
    const now = Date.now();
    sentAt.set(n, now);
    agent.send({ type: "logs", deploymentId: id, lines: [{ seq: n, ts: new Date(now).toISOString(), stream: "stdout", message: `${n} ${now}` }] });
    await new Promise((r) => setTimeout(r, INTERVAL_MS));
  }
  // Time for the last line to reach everyone.
  await new Promise((r) => setTimeout(r, 2_000));
  polling = false;
  await poller;
  f.send("collect");
  const { delays, linesPerFollower } = await message<{ delays: number[]; linesPerFollower: number[] }>(f);
  await api("DELETE", `/deployments/${id}`);
  const complete = linesPerFollower.filter((n) => n === LINES).length;
  const row = {
    followers,
    sseMedian: quantile(delays, 0.5),
    sseP99: quantile(delays, 0.99),
    pollMedian: quantile(pollDelays, 0.5),
    pollP99: quantile(pollDelays, 0.99),
    complete: `${complete}/${followers}`,
  };
  console.log(
    `${followers} follower(s): stream median ${ms(row.sseMedian)}, p99 ${ms(row.sseP99)} (${delays.length} reads; ${row.complete} followers got all ${LINES} lines)` +
      ` | polled logs route median ${ms(row.pollMedian)}, p99 ${ms(row.pollP99)} | ratio ${(row.sseMedian / row.pollMedian).toFixed(2)}`,
  );
  return row;
}

try {
  const rows = [await round(1), await round(FOLLOWERS)];
  console.log("\n| followers | stream p50 | stream p99 | polled route p50 | polled route p99 | ratio (p50) | got every line |");
  console.log("|---|---|---|---|---|---|---|");
  for (const r of rows)
    console.log(
      `| ${r.followers} | ${ms(r.sseMedian)} | ${ms(r.sseP99)} | ${ms(r.pollMedian)} | ${ms(r.pollP99)} | ${(r.sseMedian / r.pollMedian).toFixed(2)} | ${r.complete} |`,
    );
} finally {
  clearInterval(beats);
  await agent.close();
  plane.kill("SIGTERM");
}
process.exit(0);
