/**
 * Question: what does one control plane cost, in resident memory and in CPU,
 * holding 10,000 agent connections that heartbeat every 10 s (spread evenly),
 * on SQLite and on PostgreSQL, next to the same process idle in the same run?
 *
 *   npx tsx bench/fan-in.ts       (AGENTS, WINDOW_S, CONNECTS_PER_S, KINDS to change)
 *
 * The control plane and the agents run in separate processes (two for the
 * agents), each under a raised open-files limit. Figures come from /proc:
 * VmRSS, and utime+stime over WINDOW_S seconds as a share of one core.
 * Goal: under 1 GiB resident and under 25% of one core with all connected.
 */
import os from "node:os";
import { fileURLToPath } from "node:url";
import { cpuMicros, rssMb } from "./lib/cpu";
import { jsonChild as child, stopChild as stop } from "./lib/json-child";

const agents = Number(process.env.AGENTS ?? 10_000);
const windowS = Number(process.env.WINDOW_S ?? 30);
const connectsPerS = Number(process.env.CONNECTS_PER_S ?? 500);
const kinds = (process.env.KINDS ?? "sqlite,postgres").split(",");
const intervalMs = 10_000;
const agentProcs = 2;
const script = (p: string) => fileURLToPath(new URL(p, import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Stats = { connected: number; closed: number; beats: number; errors: number; closeCodes: Record<string, number> };

async function measure(pid: number, seconds: number) {
  const cpu0 = cpuMicros(pid);
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const cpuPct = ((cpuMicros(pid) - cpu0) / 1e6 / ((performance.now() - t0) / 1000)) * 100;
  return { cpuPct, rssMb: rssMb(pid) };
}

async function onlineCount(url: string): Promise<number> {
  return (await (await fetch(`${url}/nodes?status=online&limit=1`)).json()).pagination.total;
}

async function run(kind: string) {
  let plane: { url: string; pid: number } | undefined;
  const seedStart = performance.now();
  const server = child(script("./lib/fake-agents-plane.ts"), [kind, agents], (m) => (plane = m));
  while (!plane) {
    if (server.exitCode !== null) throw new Error(`${kind} control plane exited ${server.exitCode}`);
    await sleep(100);
  }
  const { url, pid } = plane;
  console.log(`${kind}: seeded ${agents} nodes in ${((performance.now() - seedStart) / 1000).toFixed(1)} s; control plane pid ${pid}`);
  await sleep(3000);
  const idle = await measure(pid, windowS);

  const stats: Stats[] = [];
  const per = Math.ceil(agents / agentProcs);
  const fakes = Array.from({ length: agentProcs }, (_, k) =>
    child(
      script("./lib/fake-agents.ts"),
      [url, k * per, Math.min(per, agents - k * per), agents, Math.round(connectsPerS / agentProcs), intervalMs],
      (s) => (stats[k] = s),
    ),
  );
  const sum = (key: "connected" | "closed" | "beats" | "errors") => stats.reduce((n, s) => n + (s?.[key] ?? 0), 0);
  const rampStart = performance.now();
  while (sum("connected") < agents) {
    if (performance.now() - rampStart > 300_000) throw new Error(`only ${sum("connected")} of ${agents} agents connected in 5 minutes`);
    await sleep(1000);
  }
  const rampS = (performance.now() - rampStart) / 1000;
  // One whole heartbeat interval first, so every agent is in its steady rhythm.
  await sleep(intervalMs + 2000);
  const beats0 = sum("beats");
  const busy = await measure(pid, windowS);
  const beatsPerS = (sum("beats") - beats0) / windowS;
  const online = await onlineCount(url);
  const sample = (await (await fetch(`${url}/nodes/node_fanin${agents - 1}`)).json()).node;
  const heartbeatAgeS = (Date.now() - Date.parse(sample.lastHeartbeat)) / 1000;
  await Promise.all(fakes.map(stop));
  await stop(server);

  const ok = busy.rssMb < 1024 && busy.cpuPct < 25;
  console.log(
    `${kind.padEnd(8)} idle: ${idle.rssMb.toFixed(0)} MB, ${idle.cpuPct.toFixed(2)}% of a core | ` +
      `${agents} agents (connected in ${rampS.toFixed(0)} s, ${online} online, ${sum("closed")} dropped, ${beatsPerS.toFixed(0)} heartbeats/s, a sampled node last heard from ${heartbeatAgeS.toFixed(1)} s before): ` +
      `${busy.rssMb.toFixed(0)} MB (${(busy.rssMb / idle.rssMb).toFixed(2)}x idle), ${busy.cpuPct.toFixed(1)}% of a core (${(busy.cpuPct / Math.max(idle.cpuPct, 0.01)).toFixed(0)}x idle) ` +
      (ok ? "(within 1 GiB and 25%)" : "(OVER the goal)"),
  );
}

console.log(
  `fan-in: ${agents} agents heartbeating every ${intervalMs / 1000} s; ${windowS} s windows; ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${os.cpus()[0]?.model}`,
);
for (const kind of kinds) {
  try {
    await run(kind);
  } catch (err) {
    console.log(`${kind} failed: ${(err as Error).message}`);
  }
}
process.exit(0);
