/**
 * Question: how long from POST /deployments to `running`, next to creating and
 * starting the same local image with Docker directly (dockerode, same engine,
 * same run), the baseline given the same CPU and memory limits as the
 * deployment? Goal: at most 1.3 times the raw Docker time.
 *
 *   npx tsx bench/deploy.ts              (RUNS=8, POLL_MS=5; --quick: RUNS=3 and only the first two cases)
 *
 * Cases, run in turn within each round so that drift hits them alike:
 * - a default deployment (no cpuCores, no memoryMb: the node's share per slot,
 *   its cores as CPU weight with no quota) against Docker given the same
 *   weight and memory; also against Docker with no limits at all, and against
 *   our own deployment given a whole core;
 * - cpuCores 1, memoryMb 512 against `--cpus 1 --memory 512m`;
 * - Docker given the default's cores as a hard quota, as deployments were
 *   before (what that quota costs a start on a node with many slots).
 * Full runs add: the raw create with a network of its own (what the isolation
 * costs done the obvious way), and ours with no sandbox ready
 * (AGENT_SANDBOX_POOL=0: a burst larger than the pool).
 */
import Docker from "dockerode";
import { cpuShares } from "../apps/agent/src/runtime/create-options";
import { ensureWebImage } from "../apps/control-plane/test/e2e/support/web-image";
import { quick, reportFigures } from "./lib/figures";
import { median } from "./lib/median";
import { startProcesses } from "./lib/system-procs";

const RUNS = Number(process.env.RUNS ?? (quick ? 3 : 8));
// How often the client asks for the status, as a client of the API would poll.
const POLL_MS = Number(process.env.POLL_MS ?? 5);
const GOAL = 1.3;
const MB = 1024 * 1024;
const image = ensureWebImage();
const docker = new Docker();
const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));
const show = (xs: number[]) => `median ${median(xs).toFixed(0)} ms (${xs.map((x) => x.toFixed(0)).join(", ")})`;

type Limits = { NanoCpus?: number; CpuShares?: number; Memory?: number; MemorySwap?: number };
const quota = (cores: number, memoryMb: number): Limits => ({
  NanoCpus: Math.round(cores * 1e9),
  CpuShares: cpuShares(cores),
  Memory: memoryMb * MB,
  MemorySwap: memoryMb * MB,
});
const weight = (cores: number, memoryMb: number): Limits => ({ CpuShares: cpuShares(cores), Memory: memoryMb * MB, MemorySwap: memoryMb * MB });

/** One create + start on Docker's default bridge (what `docker run` does), with the limits given. */
async function rawDocker(limits: Limits, ownNetwork = false): Promise<number> {
  const network = `cm-bench-${process.pid}`;
  const t0 = performance.now();
  if (ownNetwork) await docker.createNetwork({ Name: network, Driver: "bridge" });
  const c = await docker.createContainer({
    Image: image,
    Labels: { "cm.bench": "deploy" },
    HostConfig: { Init: true, ...limits, ...(ownNetwork ? { NetworkMode: network } : {}) },
  });
  await c.start();
  const ms = performance.now() - t0;
  await c.remove({ force: true });
  if (ownNetwork) await docker.getNetwork(network).remove();
  return ms;
}

type Plane = Awaited<ReturnType<typeof startProcesses>>;
type Deployed = { ms: number; cpuCores: number; memoryMb: number };

/** Until the deployment's container and sandbox are gone and the spare sandboxes are all ready: the engine is idle. */
async function settled(s: Plane, pool: number, deploymentId: string) {
  for (;;) {
    const left = await docker.listContainers({ all: true, filters: { label: [`cm.deployment-id=${deploymentId}`] } });
    const sandboxes = await docker.listContainers({ all: true, filters: { label: ["cm.sandbox=true", `cm.node-id=${s.nodeId}`] } });
    const networks = await docker.listNetworks({ filters: { label: ["cm.sandbox=true", `cm.node-id=${s.nodeId}`] } });
    if (left.length === 0 && sandboxes.length === pool && networks.length === pool && sandboxes.every((c) => c.State === "running")) return;
    await sleep(20);
  }
}

/** POST /deployments to `running`, then deleted and waited out: the baseline removes each container before its next run too. */
async function ours(s: Plane, pool: number, resources: { cpuCores?: number; memoryMb?: number }): Promise<Deployed> {
  const t0 = performance.now();
  const r = await s.call("POST", "/deployments", { nodeId: s.nodeId, customImage: image, ports: [8080], ...resources });
  if (!r.deployment) throw new Error(`create refused: ${JSON.stringify(r)}`);
  for (;;) {
    const d = (await s.call("GET", `/deployments/${r.deployment.id}`)).deployment;
    if (d.status === "running") break;
    if (d.status === "failed") throw new Error(d.statusReason);
    await sleep(POLL_MS);
  }
  const ms = performance.now() - t0;
  await s.call("DELETE", `/deployments/${r.deployment.id}`);
  await settled(s, pool, r.deployment.id);
  return { ms, cpuCores: r.deployment.cpuCores, memoryMb: r.deployment.memoryMb };
}

const times = {
  rawPlain: [] as number[],
  rawDefaultLimits: [] as number[],
  rawDefaultAsQuota: [] as number[],
  oursDefault: [] as number[],
  rawOneCore: [] as number[],
  oursOneCore: [] as number[],
  rawOwnNetwork: [] as number[],
  oursNoSandbox: [] as number[],
};
const ONE_CORE = { cpuCores: 1, memoryMb: 512 };
let held = { cpuCores: 0, memoryMb: 0 };

const s = await startProcesses({ agentEnv: { AGENT_SANDBOX_POOL: "2" } });
try {
  await settled(s, 2, "none yet");
  // One unmeasured deployment first: the first of a process runs its code cold. It also says what a default holds here.
  held = await ours(s, 2, {});
  for (let i = 0; i < RUNS; i++) {
    times.rawPlain.push(await rawDocker({}));
    const d = await ours(s, 2, {});
    times.oursDefault.push(d.ms);
    times.rawDefaultLimits.push(await rawDocker(weight(held.cpuCores, held.memoryMb)));
    times.oursOneCore.push((await ours(s, 2, ONE_CORE)).ms);
    times.rawOneCore.push(await rawDocker(quota(ONE_CORE.cpuCores, ONE_CORE.memoryMb)));
    if (!quick) times.rawDefaultAsQuota.push(await rawDocker(quota(held.cpuCores, held.memoryMb)));
  }
} finally {
  await s.stop();
}
if (!quick) {
  for (let i = 0; i < RUNS; i++) times.rawOwnNetwork.push(await rawDocker({}, true));
  const cold = await startProcesses({ agentEnv: { AGENT_SANDBOX_POOL: "0" } });
  try {
    await settled(cold, 0, "none yet");
    for (let i = 0; i < RUNS; i++) times.oursNoSandbox.push((await ours(cold, 0, {})).ms);
  } finally {
    await cold.stop();
  }
}

const m = Object.fromEntries(Object.entries(times).map(([k, xs]) => [k, xs.length ? median(xs) : Number.NaN])) as Record<keyof typeof times, number>;
const ratio = (a: number, b: number) => (a / b).toFixed(2);
const d = `${held.cpuCores} cores, ${held.memoryMb} MB`;
console.log(`a default deployment here holds ${d} (the node's share per slot); ${RUNS} runs of each, alternating`);
console.log(`raw docker create+start, no limits: ${show(times.rawPlain)}`);
console.log(
  `raw docker create+start, the default's limits (--cpu-shares ${cpuShares(held.cpuCores)} --memory ${held.memoryMb}m): ${show(times.rawDefaultLimits)}`,
);
console.log(`POST /deployments -> running, default, sandbox ready: ${show(times.oursDefault)}`);
console.log(
  `  ratio to the same limits ${ratio(m.oursDefault, m.rawDefaultLimits)}, to no limits ${ratio(m.oursDefault, m.rawPlain)}, to ours with a whole core ${ratio(m.oursDefault, m.oursOneCore)} (goal <= ${GOAL} each)`,
);
console.log(`raw docker create+start --cpus 1 --memory 512m: ${show(times.rawOneCore)}`);
console.log(
  `POST /deployments -> running, cpuCores 1 memoryMb 512, sandbox ready: ${show(times.oursOneCore)}  ratio ${ratio(m.oursOneCore, m.rawOneCore)} (goal <= ${GOAL})`,
);
if (!quick) {
  console.log(
    `raw docker create+start, the default's cores as a hard quota (--cpus ${held.cpuCores}, as before): ${show(times.rawDefaultAsQuota)}  ratio to no limits ${ratio(m.rawDefaultAsQuota, m.rawPlain)}`,
  );
  console.log(`raw docker network create + create + start: ${show(times.rawOwnNetwork)}  ratio to no limits ${ratio(m.rawOwnNetwork, m.rawPlain)}`);
  console.log(
    `POST /deployments -> running, default, no sandbox ready (AGENT_SANDBOX_POOL=0): ${show(times.oursNoSandbox)}  ratio to the same limits ${ratio(m.oursNoSandbox, m.rawDefaultLimits)}`,
  );
}
reportFigures("deploy", [
  { name: "default deployment / Docker, same limits", value: m.oursDefault / m.rawDefaultLimits, goal: GOAL, better: "lower" },
  { name: "default deployment / Docker, no limits", value: m.oursDefault / m.rawPlain, goal: GOAL, better: "lower" },
  { name: "default deployment / one given a whole core", value: m.oursDefault / m.oursOneCore, goal: GOAL, better: "lower" },
  { name: "1-core deployment / docker --cpus 1", value: m.oursOneCore / m.rawOneCore, goal: GOAL, better: "lower" },
]);
process.exit(0);
