import { execFileSync, fork } from "node:child_process";
import { load, fmt } from "../lib/load";
const id = execFileSync("docker", ["run", "-d", "-e", "QUIET_REQUESTS=1", "cm-test-web:4"], { encoding: "utf8" }).trim();
const ip = execFileSync("docker", ["inspect", "-f", "{{.NetworkSettings.IPAddress}}", id], { encoding: "utf8" }).trim();
await new Promise((r) => setTimeout(r, 1500));
const f = (file: string, args: string[]) => { const p = fork(file, args, { execArgv: ["--import", "tsx"] }); return new Promise<typeof p>((r) => p.once("message", () => r(p))); };
const a = await f("bench/lib/tcp-relay.ts", ["47001", ip, "8080"]);
const b = await f("bench/lib/tcp-relay.ts", ["47002", "127.0.0.1", "47001"]);
const h = await f("bench/_x/headrelay.ts", ["47003", "127.0.0.1", "47001"]);
const o = { concurrency: 16, durationMs: 3000 };
try {
  for (const u of [`http://${ip}:8080`, "http://127.0.0.1:47002", "http://127.0.0.1:47003"]) await load(u, () => "/", { concurrency: 16, durationMs: 500 });
  for (let k = 0; k < 2; k++) {
    const d = await load(`http://${ip}:8080`, () => "/", o);
    const r = await load("http://127.0.0.1:47002", () => "/", o);
    const hh = await load("http://127.0.0.1:47003", () => "/", o);
    console.log(`direct ${d.rps.toFixed(0)}  bare-bare ${r.rps.toFixed(0)} (${(r.rps / d.rps).toFixed(2)})  head-bare ${hh.rps.toFixed(0)} (${(hh.rps / d.rps).toFixed(2)})`);
  }
} finally { [a, b, h].forEach((p) => p.kill()); execFileSync("docker", ["rm", "-f", id]); }
process.exit(0);
