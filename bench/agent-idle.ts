/**
 * P6 (issue 28): what the installed agent costs a node at rest. The release is built and
 * installed (install-cm-agent.sh into a temporary root), then, one after another beside one
 * control plane (its own process), each runs idle for WINDOW_S after SETTLE_S:
 *   - `node -e "setInterval(()=>{},1000)"` on the release's Node: the floor any Node program pays;
 *   - the installed agent (bin/cm-agent run: the bundle on its pinned Node) with one running deployment;
 *   - the agent from the sources as the checkout's unit ran it (node --import tsx), the same deployment
 *     (adopted, not restarted).
 * Resident memory (VmRSS, sampled each second: the median and the largest) and CPU (utime+stime
 * over the window, as a share of one core). Run: npx tsx bench/agent-idle.ts  (needs Docker)
 * AGENT_NODE_OPTIONS: Node flags for the agents alone (what a flag trades, e.g. --max-semi-space-size=1).
 */
import { type ChildProcess, execFile, fork, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ensureWebImage } from "../apps/control-plane/test/e2e/support/web-image";
import { type Arch, releaseAgent } from "../scripts/release/release";
import { cpuMicros } from "./lib/cpu";
import { type Plane, removeNodeLeftovers } from "./lib/system-procs";

const SETTLE_S = Number(process.env.SETTLE_S ?? 10);
// Three of the egress guard's 30-s checks in every window: a 30-s window held one or none, by chance.
const WINDOW_S = Number(process.env.WINDOW_S ?? 90);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rssKb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);

const work = mkdtempSync(path.join(tmpdir(), "cm-bench-idle-"));
const root = path.join(work, "root");
mkdirSync(root);
const arch: Arch = process.arch === "arm64" ? "arm64" : "x64";
const started = Date.now();
await releaseAgent({ arches: [arch], outDir: path.join(work, "release"), gzipLevel: 1 });
process.stdout.write(`release built in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);

const plane = fork(path.join(ROOT, "bench/lib/endpoint-plane.ts"), [], { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
const info = await new Promise<Plane>((resolve, reject) => {
  plane.once("message", (m) => resolve(m as Plane));
  plane.once("exit", (c) => reject(new Error(`control plane exited ${c}`)));
});
const call = async (method: string, p: string, body?: unknown) =>
  (await (
    await fetch(info.url + p, {
      method,
      headers: { authorization: `Bearer ${info.tenantToken}`, "content-type": "application/json" },
      body: body ? JSON.stringify(body) : undefined,
    })
  ).json()) as any;
const until = async (what: string, check: () => Promise<boolean>) => {
  for (let i = 0; i < 600; i++) {
    if (await check()) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
};

const install = await new Promise<string>((resolve, reject) =>
  execFile(
    "bash",
    [path.join(work, "release/install-cm-agent.sh"), "--control-plane", info.url, "--skip-doctor"],
    { env: { PATH: process.env.PATH, CM_ROOT: root, AGENT_TOKEN: info.agentToken } },
    (err, stdout, stderr) => (err ? reject(new Error(`${stdout}${stderr}`)) : resolve(stdout)),
  ),
);
if (!install.includes("installed in")) throw new Error(install);
const installed = path.join(root, "opt/cm-agent/current");
const agentArgs = ["run", "--config", path.join(root, "etc/cm-agent/agent.env"), "--state-dir", path.join(root, "var/lib/cm-agent")];
const agentEnv = { PATH: process.env.PATH, LOG_LEVEL: "warn", AGENT_SANDBOX_POOL: "0", NODE_OPTIONS: process.env.AGENT_NODE_OPTIONS ?? "" };
// AGENT_CPU_PROF=DIR: each agent writes a V8 CPU profile there when it exits (what its idle time goes to);
// the installed one is then run by its Node directly, as its wrapper would (NODE_OPTIONS may not carry --cpu-prof).
const profile = process.env.AGENT_CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.AGENT_CPU_PROF}`] : [];

async function measure(name: string, child: ChildProcess, onUp: (pid: number) => Promise<void>) {
  await onUp(child.pid!);
  await sleep(SETTLE_S * 1000);
  const pid = child.pid!;
  const samples: number[] = [];
  const cpu0 = cpuMicros(pid);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < WINDOW_S; i++) {
    samples.push(rssKb(pid));
    await sleep(1000);
  }
  const cpuShare = (cpuMicros(pid) - cpu0) / (Number(process.hrtime.bigint() - t0) / 1000);
  samples.sort((a, b) => a - b);
  const mb = (kb: number) => (kb / 1024).toFixed(1);
  const line = `${name.padEnd(44)} RSS median ${mb(samples[samples.length >> 1]!)} MB, max ${mb(samples.at(-1)!)} MB; CPU ${(cpuShare * 100).toFixed(2)}% of a core`;
  process.stdout.write(`${line}\n`);
  child.kill("SIGTERM");
  await new Promise((r) => child.once("exit", r));
}

/** This agent process is connected: its status file (what doctor reads) says so. */
const connected = (pid: number) =>
  until("the agent connected", async () => {
    try {
      const status = JSON.parse(readFileSync(path.join(root, "var/lib/cm-agent/status.json"), "utf8"));
      return status.pid === pid && status.state === "ready";
    } catch {
      return false;
    }
  });
let deploymentId = "";
try {
  await measure(
    "node -e setInterval (the release's Node)",
    spawn(path.join(installed, "node/bin/node"), ["-e", "setInterval(()=>{},1000)"], { stdio: "ignore" }),
    async () => {},
  );
  const image = ensureWebImage();
  await measure(
    "installed agent (bundle), 1 running deployment",
    profile.length > 0
      ? spawn(path.join(installed, "node/bin/node"), [...profile, path.join(installed, "lib/cm-agent.mjs"), ...agentArgs], { env: agentEnv, stdio: "inherit" })
      : spawn(path.join(installed, "bin/cm-agent"), agentArgs, { env: agentEnv, stdio: "inherit" }),
    async (pid) => {
      await connected(pid);
      // Online once its specs are in, not at hello.
      await until("the node online", async () => (await call("GET", `/nodes/${info.nodeId}`)).node?.status === "online");
      // Idle: the web server logs no tick and no request (the log benches measure shipping).
      const created = await call("POST", "/deployments", {
        nodeId: info.nodeId,
        customImage: image,
        ports: [8080],
        env: { TICK_MS: String(process.env.TICK_MS ?? 0), QUIET_REQUESTS: "1" },
      });
      if (!created.deployment) throw new Error(`the deployment was not created: ${JSON.stringify(created)}`);
      deploymentId = created.deployment.id;
      await until("running", async () => (await call("GET", `/deployments/${deploymentId}`)).deployment.status === "running");
    },
  );
  await measure(
    "agent from sources (node --import tsx), same",
    spawn(process.execPath, [...profile, "--import", "tsx", "apps/agent/src/index.ts", ...agentArgs], { cwd: ROOT, env: agentEnv, stdio: "inherit" }),
    async (pid) => {
      await connected(pid);
      await until("running", async () => (await call("GET", `/deployments/${deploymentId}`)).deployment.status === "running");
    },
  );
} finally {
  plane.kill("SIGTERM");
  await removeNodeLeftovers(info.nodeId);
  rmSync(work, { recursive: true, force: true });
}
