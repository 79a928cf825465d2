/**
 * Question: how long from POST /deployments to `running`, next to creating and
 * starting the same local image with Docker directly (dockerode, same engine,
 * same run)? Goal: at most 1.3 times the raw Docker time.
 *
 *   npx tsx bench/deploy.ts              (RUNS=8, POLL_MS=5)
 *
 * Figures: the raw baseline (create + start on Docker's default bridge, as
 * `docker run` does); the same by hand with a network of its own (what the
 * isolation every deployment gets costs when done the obvious way); ours with
 * the agent's ready sandboxes (the default, AGENT_SANDBOX_POOL=2); and ours
 * with none ready (AGENT_SANDBOX_POOL=0: a burst larger than the pool).
 */
import Docker from "dockerode";
import { ensureWebImage } from "../apps/control-plane/test/e2e/support/web-image";
import { median } from "./lib/median";
import { startProcesses } from "./lib/system-procs";

const RUNS = Number(process.env.RUNS ?? 8);
// How often the client asks for the status, as a client of the API would poll.
const POLL_MS = Number(process.env.POLL_MS ?? 5);
const image = ensureWebImage();
const docker = new Docker();
const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));
const show = (xs: number[]) => `median ${median(xs).toFixed(0)} ms (${xs.map((x) => x.toFixed(0)).join(", ")})`;

async function rawDocker(ownNetwork: boolean): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const network = `cm-bench-${i}`;
    const t0 = performance.now();
    if (ownNetwork) await docker.createNetwork({ Name: network, Driver: "bridge" });
    const c = await docker.createContainer({
      Image: image,
      Labels: { "cm.bench": "deploy" },
      HostConfig: { Init: true, ...(ownNetwork ? { NetworkMode: network } : {}) },
    });
    await c.start();
    times.push(performance.now() - t0);
    await c.remove({ force: true });
    if (ownNetwork) await docker.getNetwork(network).remove();
  }
  return times;
}

async function ours(sandboxPool: number): Promise<number[]> {
  const s = await startProcesses({ agentEnv: { AGENT_SANDBOX_POOL: String(sandboxPool) } });
  /** Until the deployment's container and sandbox are gone and the spare sandboxes are all ready: the engine is idle. */
  const settled = async (deploymentId: string) => {
    for (;;) {
      const left = await docker.listContainers({ all: true, filters: { label: [`cm.deployment-id=${deploymentId}`] } });
      const sandboxes = await docker.listContainers({ all: true, filters: { label: ["cm.sandbox=true", `cm.node-id=${s.nodeId}`] } });
      const networks = await docker.listNetworks({ filters: { label: ["cm.sandbox=true", `cm.node-id=${s.nodeId}`] } });
      if (left.length === 0 && sandboxes.length === sandboxPool && networks.length === sandboxPool && sandboxes.every((c) => c.State === "running")) return;
      await sleep(20);
    }
  };
  const times: number[] = [];
  try {
    await settled("none yet");
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      const r = await s.call("POST", "/deployments", { nodeId: s.nodeId, customImage: image, ports: [8080] });
      for (;;) {
        const d = (await s.call("GET", `/deployments/${r.deployment.id}`)).deployment;
        if (d.status === "running") break;
        if (d.status === "failed") throw new Error(d.statusReason);
        await sleep(POLL_MS);
      }
      times.push(performance.now() - t0);
      await s.call("DELETE", `/deployments/${r.deployment.id}`);
      // The baseline removes each container before its next run; so does this.
      await settled(r.deployment.id);
    }
  } finally {
    await s.stop();
  }
  return times;
}

const raw = await rawDocker(false);
const rawOwnNetwork = await rawDocker(true);
const warm = await ours(2);
const cold = await ours(0);
console.log(`raw docker create+start (default bridge): ${show(raw)}`);
console.log(`raw docker network create + create + start: ${show(rawOwnNetwork)}  ratio ${(median(rawOwnNetwork) / median(raw)).toFixed(2)}`);
console.log(`POST /deployments -> running, sandbox ready (default): ${show(warm)}  ratio ${(median(warm) / median(raw)).toFixed(2)} (goal <= 1.3)`);
console.log(`POST /deployments -> running, no sandbox ready (AGENT_SANDBOX_POOL=0): ${show(cold)}  ratio ${(median(cold) / median(raw)).toFixed(2)}`);
process.exit(0);
