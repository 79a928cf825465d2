// A machine enrolled again (a new node, a new token, the same agent state
// directory) must not keep running what the old node left: its tenants'
// containers, spare network sandboxes and their bridge networks. Another agent
// on the same Docker engine (another install: another state directory) keeps
// everything, and a fresh agent claims nothing that is not its node's.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { needs } from "@cm/testkit";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import type { Agent } from "../../src/agent";
import { createAgent } from "../../src/agent";
import { systemClock } from "../../src/clock";
import { wsSocketFactory } from "../../src/connection/socket";
import { createLogger } from "../../src/logger";
import { DockerRuntime } from "../../src/runtime/docker-runtime";
import { deploymentSpec, fakeHostProbe, testConfig } from "../support/agent-harness";
import { dockerTestRun } from "../support/docker-test-run";
import { FakeControlPlane } from "../support/fake-control-plane";
import { ensureScriptImage } from "../support/script-image";

const run = dockerTestRun();
let image = "";
const fakes: FakeControlPlane[] = [];
const agents: Agent[] = [];
const stateDirs: string[] = [];

beforeAll(() => {
  image = ensureScriptImage();
});
afterEach(async () => {
  for (const agent of agents.splice(0)) await agent.stop();
  for (const fake of fakes.splice(0)) await fake.stop();
  for (const dir of stateDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  await run.cleanup();
});
afterAll(async () => {
  await run.cleanup();
});

function stateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "cm-agent-state-"));
  stateDirs.push(dir);
  return dir;
}

/** A control plane that knows one node, and an agent enrolled as it; `log` collects the agent's lines. */
async function enrol(nodeId: string, options: { stateDir?: string; log?: string[] } = {}): Promise<{ fake: FakeControlPlane; agent: Agent }> {
  const fake = await FakeControlPlane.start({ tokens: { [`token-${nodeId}`]: nodeId } });
  fakes.push(fake);
  const logger = createLogger({ level: "debug", write: (line) => options.log?.push(line) });
  const config = testConfig(fake, run, { token: `token-${nodeId}`, ...(options.stateDir ? { stateDir: options.stateDir } : {}) });
  const agent = createAgent(config, {
    runtime: new DockerRuntime({ docker: run.docker, logger }),
    hostProbe: fakeHostProbe(),
    socketFactory: wsSocketFactory(),
    clock: systemClock,
    logger,
  });
  agents.push(agent);
  await agent.start();
  await fake.waitFor(() => agent.state === "ready", 5_000, `${nodeId} ready`);
  return { fake, agent };
}

async function runDeployment(fake: FakeControlPlane, suffix: string): Promise<string> {
  const spec = deploymentSpec(run, suffix, image, { env: { SCRIPT: "sleep 600" } });
  fake.desired.set(spec.deploymentId, spec);
  fake.sync();
  await fake.waitFor(() => fake.statuses(spec.deploymentId).some((s) => s.status === "running"), 15_000, `${suffix} running`);
  return spec.deploymentId;
}

async function stopAgent(agent: Agent): Promise<void> {
  agents.splice(agents.indexOf(agent), 1);
  await agent.stop();
}

const label = (key: string, value: string) => `${key}=${value}`;
const testRun = label("cm.test-run", run.labels["cm.test-run"]!);

async function containersOfDeployment(deploymentId: string) {
  return run.docker.listContainers({ all: true, filters: { label: [testRun, label("cm.deployment-id", deploymentId)] } });
}

async function sandboxesOfNode(nodeId: string) {
  const filters = { label: [testRun, "cm.sandbox=true", label("cm.node-id", nodeId)] };
  const containers = await run.docker.listContainers({ all: true, filters });
  const networks = await run.docker.listNetworks({ filters });
  return { containers: containers.length, networks: networks.length };
}

async function eventually<T>(check: () => Promise<T | false>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

needs("docker", "busybox").describe("re-enrolling a machine", () => {
  it("removes the old node's containers, spare sandboxes and networks, and leaves another install's alone", async () => {
    const machine = stateDir();
    // Another agent on the same engine, with the same container labels: another install.
    const other = await enrol("node-other", { stateDir: stateDir() });
    const othersDeployment = await runDeployment(other.fake, "others");

    const old = await enrol("node-old", { stateDir: machine });
    const oldDeployment = await runDeployment(old.fake, "old");
    await eventually(async () => (await sandboxesOfNode("node-old")).containers >= 3 || false, 20_000, "the old node's spare sandboxes");
    await stopAgent(old.agent); // retired: its agent exits and leaves everything as it is

    const startedAt = Date.now();
    await enrol("node-new", { stateDir: machine });
    await eventually(async () => (await containersOfDeployment(oldDeployment)).length === 0 || false, 20_000, "the old node's container removed");
    await eventually(
      async () => {
        const left = await sandboxesOfNode("node-old");
        return (left.containers === 0 && left.networks === 0) || false;
      },
      20_000,
      "the old node's sandboxes and networks removed",
    );
    console.log(`re-enrolment: the old node's container, sandboxes and networks gone ${Date.now() - startedAt} ms after the new agent started`);

    const others = await containersOfDeployment(othersDeployment);
    expect(others.map((c) => c.State)).toEqual(["running"]);
    expect((await sandboxesOfNode("node-other")).containers).toBeGreaterThanOrEqual(3); // its deployment's and its spares
    expect(other.fake.statuses(othersDeployment).map((s) => s.status)).toEqual(["starting", "running"]);
  });

  it("two agents sharing one state directory by mistake leave each other's containers running", async () => {
    const shared = stateDir();
    const a = await enrol("node-a", { stateDir: shared });
    const deploymentA = await runDeployment(a.fake, "a");
    const b = await enrol("node-b", { stateDir: shared });
    const deploymentB = await runDeployment(b.fake, "b");
    // Each reconnects (a sync each): neither takes the other's for an old enrolment's.
    a.fake.closeAgent(1012, "restarting");
    b.fake.closeAgent(1012, "restarting");
    await a.fake.waitFor(() => a.fake.hellos === 2 && a.agent.state === "ready", 10_000, "a back");
    await b.fake.waitFor(() => b.fake.hellos === 2 && b.agent.state === "ready", 10_000, "b back");
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await containersOfDeployment(deploymentA)).map((c) => c.State)).toEqual(["running"]);
    expect((await containersOfDeployment(deploymentB)).map((c) => c.State)).toEqual(["running"]);
  });

  it("a fresh agent neither adopts nor reports containers of another node on the same engine", async () => {
    const first = await enrol("node-first");
    const deploymentId = await runDeployment(first.fake, "firsts");
    await stopAgent(first.agent);

    const log: string[] = [];
    const second = await enrol("node-second", { log });
    second.fake.sync();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const adopted = log.filter((line) => /adopted/i.test(line));
    expect(adopted.join("\n")).not.toMatch(/"total":[1-9]|"running":[1-9]/);
    expect(second.fake.statuses(deploymentId)).toEqual([]);
    expect((await containersOfDeployment(deploymentId)).map((c) => c.State)).toEqual(["running"]);
  });
});
