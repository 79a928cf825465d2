/**
 * Question: what does the public endpoint path (gateway -> tunnel -> agent ->
 * container) cost next to reaching the same container port directly, in the
 * same run? Small requests (req/s, p50, p99, CPU per request of each process)
 * and one large transfer (MB/s).
 *
 *   npx tsx bench/endpoints.ts   (DURATION_MS=4000 CONCURRENCY=16 ROUNDS=3 LARGE_MIB=64; REQUEST_LOGS=1: the server logs each request)
 *   npx tsx bench/endpoints.ts --quick   (1 round of 2 s, 32 MiB, one 1 s latency sample: what bench:check runs)
 *
 * Goal: at least half the direct throughput, under 2 ms added median latency.
 * The phases alternate (direct, endpoint, two bare relays) for ROUNDS rounds
 * and the medians are compared: on a small machine the rate of any one phase
 * drifts by a third from minute to minute.
 */
import { execFileSync } from "node:child_process";
import http from "node:http";
import { until } from "../apps/control-plane/test/e2e/support/system";
import { ensureWebImage } from "../apps/control-plane/test/e2e/support/web-image";
import { cpuPer, fmtCpu } from "./lib/cpu";
import { quick, reportFigures } from "./lib/figures";
import { fmt, type LoadResult, load } from "./lib/load";
import { median } from "./lib/median";
import { startRelay } from "./lib/relays";
import { startProcesses } from "./lib/system-procs";

const durationMs = Number(process.env.DURATION_MS ?? (quick ? 2000 : 4000));
const concurrency = Number(process.env.CONCURRENCY ?? 16);
const rounds = Number(process.env.ROUNDS ?? (quick ? 1 : 3));
// Long enough that setting up a connection and a tunnel is a small part of it.
const largeMib = Number(process.env.LARGE_MIB ?? (quick ? 32 : 64));
const latencySamples = quick ? 1 : 3;
// The server logs a line per request unless told not to; those lines flow to the
// control plane in both phases and take CPU from everything on a 2-core machine.
const QUIET = process.env.REQUEST_LOGS !== "1";

const image = ensureWebImage();
const s = await startProcesses();
const created: string[] = [];
const relays: Array<{ proc: { kill(): void } }> = [];
try {
  const r = await s.call("POST", "/deployments", { nodeId: s.nodeId, customImage: image, ports: [8080], env: QUIET ? { QUIET_REQUESTS: "1" } : {} });
  created.push(r.deployment.id);
  const dep = await until(
    "endpoint ready",
    async () => {
      const d = (await s.call("GET", `/deployments/${r.deployment.id}`)).deployment;
      return d.endpoints[0]?.ready && d;
    },
    60_000,
  );
  const endpointHost = new URL(dep.endpoints[0].url).host;
  const cid = execFileSync("docker", ["ps", "-q", "--filter", `label=cm.deployment-id=${dep.id}`], { encoding: "utf8" }).trim();
  // Every process of the container (an init process runs the server as its child), by host pid.
  const containerPid = execFileSync("docker", ["top", cid, "-eo", "pid"], { encoding: "utf8" })
    .split("\n")
    .slice(1)
    .filter((l) => l.trim())
    .map(Number);
  // The container joined its sandbox's network namespace: the address is the sandbox's.
  const sandbox = execFileSync("docker", ["inspect", "-f", '{{index .Config.Labels "cm.sandbox-name"}}', cid], { encoding: "utf8" }).trim();
  const ip = execFileSync("docker", ["inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", sandbox], { encoding: "utf8" }).trim();
  const direct = `http://${ip}:8080`;
  const gateway = s.url;
  // The floor on this machine: two processes that only pipe bytes (no HTTP
  // parsing at all) in front of the same container, as the gateway and the agent are.
  const agentSide = await startRelay("tcp-relay.ts", ip, 8080);
  const gatewaySide = await startRelay("tcp-relay.ts", "127.0.0.1", agentSide.port);
  relays.push(agentSide, gatewaySide);
  const bare = `http://127.0.0.1:${gatewaySide.port}`;

  const phases = {
    direct: { url: direct, headers: {}, pids: { "load generator": process.pid, container: containerPid } },
    endpoint: {
      url: gateway,
      headers: { host: endpointHost },
      pids: { "load generator": process.pid, container: containerPid, "control plane": s.pids.plane, agent: s.pids.agent },
    },
    "two bare relays": {
      url: bare,
      headers: {},
      pids: { "load generator": process.pid, container: containerPid, relay1: gatewaySide.proc.pid!, relay2: agentSide.proc.pid! },
    },
  };
  type Phase = keyof typeof phases;
  console.log(`small requests: GET / (24 bytes), ${concurrency} keep-alive clients, ${rounds} rounds of ${durationMs} ms per phase`);
  for (const p of Object.values(phases)) await load(p.url, () => "/", { concurrency, durationMs: 1000, headers: p.headers });
  const seen: Record<Phase, Array<{ result: LoadResult; usPer: Record<string, number> }>> = { direct: [], endpoint: [], "two bare relays": [] };
  for (let round = 1; round <= rounds; round++) {
    const line: string[] = [];
    for (const [name, p] of Object.entries(phases) as Array<[Phase, (typeof phases)[Phase]]>) {
      const m = await cpuPer(p.pids, () => load(p.url, () => "/", { concurrency, durationMs, headers: p.headers }));
      seen[name].push(m);
      line.push(`${name} ${m.result.rps.toFixed(0)}`);
    }
    const [d, e, b] = [seen.direct.at(-1)!, seen.endpoint.at(-1)!, seen["two bare relays"].at(-1)!].map((x) => x.result.rps);
    console.log(`round ${round}: ${line.join(", ")} req/s; endpoint/direct ${(e! / d!).toFixed(2)}, relays/direct ${(b! / d!).toFixed(2)}`);
  }
  const rps = (name: Phase) => median(seen[name].map((x) => x.result.rps));
  const cpu = (name: Phase) => Object.fromEntries(Object.keys(phases[name].pids).map((k) => [k, median(seen[name].map((x) => x.usPer[k]!))]));
  for (const name of Object.keys(phases) as Phase[]) {
    const last = seen[name].at(-1)!.result;
    console.log(`${name.padEnd(16)} median ${rps(name).toFixed(0).padStart(6)} req/s (last round: ${fmt(last)}); ${fmtCpu(cpu(name))}`);
  }
  console.log(
    `throughput ratio (endpoint/direct, medians): ${(rps("endpoint") / rps("direct")).toFixed(2)}; two bare relays/direct ${(rps("two bare relays") / rps("direct")).toFixed(2)}; endpoint/two bare relays ${(rps("endpoint") / rps("two bare relays")).toFixed(2)}`,
  );
  // With a core for each process and the clients elsewhere, the busiest process of a path caps its rate.
  const cap = (us: Record<string, number>, names: string[]) => 1e6 / Math.max(...names.map((n) => us[n]!));
  const capDirect = cap(cpu("direct"), ["container"]);
  const capEndpoint = cap(cpu("endpoint"), ["container", "control plane", "agent"]);
  console.log(
    `a core per process, clients elsewhere (from CPU per request): direct capped at ${capDirect.toFixed(0)} req/s, endpoint at ${capEndpoint.toFixed(0)} req/s, ratio ${(capEndpoint / capDirect).toFixed(2)}`,
  );

  // Alternated three times, medians: one 2 s sample once read +1.1 ms where the others read +0.25.
  const d1s: number[] = [];
  const e1s: number[] = [];
  for (let i = 0; i < latencySamples; i++) {
    d1s.push((await load(direct, () => "/", { concurrency: 1, durationMs: quick ? 1000 : 2000 })).p50Ms);
    e1s.push((await load(gateway, () => "/", { concurrency: 1, durationMs: quick ? 1000 : 2000, headers: { host: endpointHost } })).p50Ms);
  }
  const [d1, e1] = [median(d1s), median(e1s)];
  console.log(
    `one client (median of ${latencySamples}): direct p50 ${d1.toFixed(3)} ms, endpoint p50 ${e1.toFixed(3)} ms: +${(e1 - d1).toFixed(3)} ms added median latency`,
  );

  const big = (base: string, headers: Record<string, string>) =>
    new Promise<number>((resolve, reject) => {
      const u = new URL(base);
      const t0 = performance.now();
      let n = 0;
      http
        .get({ host: u.hostname, port: u.port, path: `/big?mib=${largeMib}`, headers }, (res) => {
          res.on("data", (c: Buffer) => (n += c.length));
          res.on("end", () => resolve(n / 1e6 / ((performance.now() - t0) / 1000)));
        })
        .on("error", reject);
    });
  // Five measured transfers per phase; `requests` counts megabytes, so CPU comes out per MB.
  const runs = async (base: string, headers: Record<string, string>) => {
    const xs: number[] = [];
    for (let i = 0; i < 5; i++) xs.push(await big(base, headers));
    return { mbps: median(xs), requests: (5 * largeMib * 1024 * 1024) / 1e6 };
  };
  // One transfer per path first, unmeasured, as the small requests have their warm-up
  // second: the first transfers on a path run several times slower while code and TCP windows warm.
  for (const p of Object.values(phases)) await big(p.url, p.headers);
  const bd = await cpuPer(phases.direct.pids, () => runs(direct, {}));
  const be = await cpuPer(phases.endpoint.pids, () => runs(gateway, { host: endpointHost }));
  const bb = await cpuPer(phases["two bare relays"].pids, () => runs(bare, {}));
  const perMb = (x: typeof bd) => fmtCpu(x.usPer, "MB");
  console.log(
    `large transfer (${largeMib} MiB, median of 5): direct ${bd.result.mbps.toFixed(0)} MB/s, endpoint ${be.result.mbps.toFixed(0)} MB/s, ratio ${(be.result.mbps / bd.result.mbps).toFixed(2)}; two bare relays ${bb.result.mbps.toFixed(0)} MB/s, ratio ${(bb.result.mbps / bd.result.mbps).toFixed(2)}`,
  );
  console.log(`  CPU: direct: ${perMb(bd)}; endpoint: ${perMb(be)}; two bare relays: ${perMb(bb)}`);
  // The large transfer's goal against direct is not met on 2 cores even by two bare relays (bench/README.md):
  // what is guarded is that the endpoint stays at that floor.
  reportFigures("endpoints", [
    { name: "small requests, endpoint / direct", value: rps("endpoint") / rps("direct"), goal: 0.5, better: "higher" },
    { name: "added median latency, one client", value: e1 - d1, goal: 2, better: "lower", unit: "ms" },
    { name: "large transfer, endpoint / two bare relays", value: be.result.mbps / bb.result.mbps, goal: 1, better: "higher" },
  ]);
} finally {
  for (const r of relays) r.proc.kill();
  for (const id of created) await s.call("DELETE", `/deployments/${id}`).catch(() => undefined);
  await new Promise((r) => setTimeout(r, 3000));
  await s.stop();
}
process.exit(0);
