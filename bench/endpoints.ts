/**
 * Question: what does the public endpoint path (gateway -> tunnel -> agent ->
 * container) cost next to reaching the same container port directly, in the
 * same run? Small requests (req/s, p50, p99) and one large transfer (MB/s).
 *
 *   npx tsx bench/endpoints.ts            (DURATION_MS=5000 CONCURRENCY=16; REQUEST_LOGS=1: the server logs each request)
 *
 * Goal: at least half the direct throughput, under 2 ms added median latency.
 */
import { execFileSync } from "node:child_process";
import http from "node:http";
import { ensureWebImage } from "../apps/control-plane/test/e2e/support/web-image";
import { until } from "../apps/control-plane/test/e2e/support/system";
import { startRelay } from "./lib/relays";
import { startProcesses } from "./lib/system-procs";

async function relayChain(host: string, port: number) {
  const agentSide = await startRelay("tcp-relay.ts", host, port);
  const gatewaySide = await startRelay("tcp-relay.ts", "127.0.0.1", agentSide.port);
  return { url: `http://127.0.0.1:${gatewaySide.port}`, stop: () => [agentSide, gatewaySide].forEach((r) => r.proc.kill()) };
}
import { fmt, load } from "./lib/load";

const durationMs = Number(process.env.DURATION_MS ?? 5000);
const concurrency = Number(process.env.CONCURRENCY ?? 16);
// The server logs a line per request unless told not to; those lines flow to the
// control plane in both phases and take CPU from everything on a 2-core machine.
const QUIET = process.env.REQUEST_LOGS !== "1";

const image = ensureWebImage();
const s = await startProcesses();
const created: string[] = [];
try {
  const r = await s.call("POST", "/deployments", { nodeId: s.nodeId, customImage: image, ports: [8080], env: QUIET ? { QUIET_REQUESTS: "1" } : {} });
  created.push(r.deployment.id);
  const dep = await until("endpoint ready", async () => {
    const d = (await s.call("GET", `/deployments/${r.deployment.id}`)).deployment;
    return d.endpoints[0]?.ready && d;
  }, 60_000);
  const endpointHost = new URL(dep.endpoints[0].url).host;
  const cid = execFileSync("docker", ["ps", "-q", "--filter", `label=cm.deployment-id=${dep.id}`], { encoding: "utf8" }).trim();
  // The container joined its sandbox's network namespace: the address is the sandbox's.
  const sandbox = execFileSync("docker", ["inspect", "-f", '{{index .Config.Labels "cm.sandbox-name"}}', cid], { encoding: "utf8" }).trim();
  const ip = execFileSync("docker", ["inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", sandbox], { encoding: "utf8" }).trim();
  const direct = `http://${ip}:8080`;
  const gateway = s.url;

  console.log(`small requests: GET / (24 bytes), ${concurrency} keep-alive clients, ${durationMs} ms each`);
  await load(direct, () => "/", { concurrency, durationMs: 1000 });
  await load(gateway, () => "/", { concurrency, durationMs: 1000, headers: { host: endpointHost } });
  const d = await load(direct, () => "/", { concurrency, durationMs });
  const e = await load(gateway, () => "/", { concurrency, durationMs, headers: { host: endpointHost } });
  console.log(`direct     ${fmt(d)}`);
  console.log(`endpoint   ${fmt(e)}`);
  const d1 = await load(direct, () => "/", { concurrency: 1, durationMs: 2000 });
  const e1 = await load(gateway, () => "/", { concurrency: 1, durationMs: 2000, headers: { host: endpointHost } });
  console.log(`one client: direct p50 ${d1.p50Ms.toFixed(3)} ms, endpoint p50 ${e1.p50Ms.toFixed(3)} ms: +${(e1.p50Ms - d1.p50Ms).toFixed(3)} ms added median latency`);
  console.log(`throughput ratio (endpoint/direct): ${(e.rps / d.rps).toFixed(2)}`);

  // The floor on this machine: two processes that only pipe bytes (no HTTP, no
  // WebSocket) in front of the same container, as the gateway and the agent are.
  const relays = await relayChain(ip, 8080);
  try {
    await load(relays.url, () => "/", { concurrency, durationMs: 1000 });
    const bare = await load(relays.url, () => "/", { concurrency, durationMs });
    console.log(`two bare TCP relays ${fmt(bare)}  ratio ${(bare.rps / d.rps).toFixed(2)}: the most two relay processes allow here`);
  } finally {
    relays.stop();
  }

  const big = (base: string, headers: Record<string, string>) =>
    new Promise<number>((resolve, reject) => {
      const u = new URL(base);
      const t0 = performance.now();
      let n = 0;
      http.get({ host: u.hostname, port: u.port, path: "/big", headers }, (res) => {
        res.on("data", (c: Buffer) => (n += c.length));
        res.on("end", () => resolve(n / 1e6 / ((performance.now() - t0) / 1000)));
      }).on("error", reject);
    });
  const runs = async (base: string, headers: Record<string, string>) => {
    const xs: number[] = [];
    for (let i = 0; i < 5; i++) xs.push(await big(base, headers));
    return xs.sort((a, b) => a - b)[2]!;
  };
  const bd = await runs(direct, {});
  const be = await runs(gateway, { host: endpointHost });
  console.log(`large transfer (16 MiB, median of 5): direct ${bd.toFixed(0)} MB/s, endpoint ${be.toFixed(0)} MB/s, ratio ${(be / bd).toFixed(2)}`);
} finally {
  for (const id of created) await s.call("DELETE", `/deployments/${id}`).catch(() => undefined);
  await new Promise((r) => setTimeout(r, 3000));
  await s.stop();
}
process.exit(0);
