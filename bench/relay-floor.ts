/**
 * Question: what is the most a gateway process + agent process pair can carry
 * on this machine, and does rewriting each request head (as a gateway must)
 * cost much more than relaying bytes? Three chains in front of the same
 * container, against it directly, interleaved in the same run:
 *   bare + bare: two processes that only pipe bytes (the floor)
 *   head + bare: the first also rewrites request heads (bench/lib/head-relay.ts)
 *
 *   npx tsx bench/relay-floor.ts          (DURATION_MS=3000 CONCURRENCY=16 ROUNDS=2)
 */
import { type ChildProcess, execFileSync } from "node:child_process";
import { ensureWebImage } from "../apps/control-plane/test/e2e/support/web-image";
import { load } from "./lib/load";
import { type RelayScript, startRelay } from "./lib/relays";

const durationMs = Number(process.env.DURATION_MS ?? 3000);
const concurrency = Number(process.env.CONCURRENCY ?? 16);
const rounds = Number(process.env.ROUNDS ?? 2);

const procs: ChildProcess[] = [];
async function relay(script: RelayScript, host: string, port: number): Promise<number> {
  const started = await startRelay(script, host, port);
  procs.push(started.proc);
  return started.port;
}

const container = execFileSync("docker", ["run", "-d", "--label", "cm.bench=relay-floor", "-e", "QUIET_REQUESTS=1", ensureWebImage()], {
  encoding: "utf8",
}).trim();
try {
  const ip = execFileSync("docker", ["inspect", "-f", "{{.NetworkSettings.IPAddress}}", container], { encoding: "utf8" }).trim();
  const direct = `http://${ip}:8080`;
  const agentSide = await relay("tcp-relay.ts", ip, 8080);
  const bare = `http://127.0.0.1:${await relay("tcp-relay.ts", "127.0.0.1", agentSide)}`;
  const head = `http://127.0.0.1:${await relay("head-relay.ts", "127.0.0.1", agentSide)}`;
  for (const url of [direct, bare, head]) {
    for (let i = 0; i < 50; i++) {
      const r = await load(url, () => "/", { concurrency: 1, durationMs: 100 });
      if (r.errors === 0 && r.requests > 0) break; // the server is up
    }
    await load(url, () => "/", { concurrency, durationMs: 500 });
  }
  console.log(`GET / (24 bytes), ${concurrency} keep-alive clients, ${durationMs} ms each, interleaved`);
  for (let round = 0; round < rounds; round++) {
    const d = await load(direct, () => "/", { concurrency, durationMs });
    const b = await load(bare, () => "/", { concurrency, durationMs });
    const h = await load(head, () => "/", { concurrency, durationMs });
    console.log(
      `direct ${d.rps.toFixed(0)} req/s   bare+bare ${b.rps.toFixed(0)} (${(b.rps / d.rps).toFixed(2)})   head+bare ${h.rps.toFixed(0)} (${(h.rps / d.rps).toFixed(2)})`,
    );
  }
} finally {
  for (const proc of procs) proc.kill();
  execFileSync("docker", ["rm", "-f", container], { stdio: "ignore" });
}
process.exit(0);
