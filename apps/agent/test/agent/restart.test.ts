// The agent dies mid-run and a new one takes over the same Docker engine: the
// container keeps running untouched, and its log arrives complete and once.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { needs } from "@cm/testkit";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import type { Agent } from "../../src/agent";
import { runAgentUntilSignal } from "../../src/cli/run-agent";
import { systemClock } from "../../src/clock";
import { wsSocketFactory } from "../../src/connection/socket";
import { silentLogger } from "../../src/logger";
import { DockerRuntime } from "../../src/runtime/docker-runtime";
import { readStatusFile } from "../../src/state-file";
import { deploymentSpec, fakeHostProbe, startTestAgent, testConfig } from "../support/agent-harness";
import { dockerTestRun } from "../support/docker-test-run";
import { FakeControlPlane } from "../support/fake-control-plane";
import { ensureScriptImage } from "../support/script-image";

const run = dockerTestRun();
let image = "";
let fake: FakeControlPlane;
const agents: Agent[] = [];

// Numbered lines, fast enough that lines keep coming while agents come and go.
const COUNTER = 'i=1; while true; do echo "line $i"; i=$((i+1)); usleep 2000; done';

beforeAll(() => {
  image = ensureScriptImage();
});
afterEach(async () => {
  for (const agent of agents.splice(0)) await agent.stop();
  await fake?.stop();
});
afterAll(async () => {
  await run.cleanup();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function startAgent(): Promise<Agent> {
  const agent = await startTestAgent(fake, run);
  agents.push(agent);
  await fake.waitFor(() => agent.state === "ready", 5_000, "ready");
  return agent;
}

/** Every stored line is "line <seq>": nothing lost, nothing twice, in order. */
function expectCompleteLog(deploymentId: string): void {
  const lines = fake.storedLines(deploymentId);
  const broken = lines.findIndex((line, i) => line.seq !== i + 1 || line.message !== `line ${i + 1}`);
  expect(broken, `line ${broken}: ${JSON.stringify(lines[broken])}`).toBe(-1);
  expect(fake.duplicateLines).toBe(0);
}

async function inspect(deploymentId: string) {
  const [listed] = await run.docker.listContainers({ all: true, filters: { label: [`cm.deployment-id=${deploymentId}`] } });
  const info = await run.docker.getContainer(listed!.Id).inspect();
  return { id: info.Id, startedAt: info.State.StartedAt, running: info.State.Running };
}

needs("docker", "busybox").describe("agent restart", () => {
  it("adopts the running container and resumes log shipping from the acknowledged cursor", async () => {
    fake = await FakeControlPlane.start();
    const first = await startAgent();
    const spec = deploymentSpec(run, "adopt", image, { env: { SCRIPT: COUNTER } });
    fake.desired.set(spec.deploymentId, spec);
    fake.sync();
    await fake.waitFor(() => fake.storedLines(spec.deploymentId).length >= 200, 15_000, "200 lines");
    const before = await inspect(spec.deploymentId);

    // The first agent's last frames are lost in flight, as when it is killed.
    fake.storeLogs = false;
    await sleep(200);
    await first.stop();
    fake.storeLogs = true;
    const storedAtDeath = fake.storedLines(spec.deploymentId).length;
    await sleep(300); // the container logs on with no agent at all
    expect(await inspect(spec.deploymentId)).toEqual(before);

    const statusCount = fake.statuses(spec.deploymentId).length;
    await startAgent();
    await fake.waitFor(() => fake.storedLines(spec.deploymentId).length >= storedAtDeath + 400, 15_000, "400 more lines");

    expect(await inspect(spec.deploymentId)).toEqual(before); // same container, never restarted
    expect(
      fake
        .statuses(spec.deploymentId)
        .slice(statusCount)
        .map((s) => s.status),
    ).toEqual(["running"]);
    expectCompleteLog(spec.deploymentId);
  });

  it("resumes after a dropped connection without losing or repeating lines", async () => {
    fake = await FakeControlPlane.start();
    await startAgent();
    const spec = deploymentSpec(run, "reconnect", image, { env: { SCRIPT: COUNTER } });
    fake.desired.set(spec.deploymentId, spec);
    fake.sync();
    await fake.waitFor(() => fake.storedLines(spec.deploymentId).length >= 100, 15_000, "100 lines");

    for (let round = 0; round < 3; round++) {
      fake.storeLogs = false;
      await sleep(100);
      fake.closeAgent(1012, "restarting");
      fake.storeLogs = true;
      const stored = fake.storedLines(spec.deploymentId).length;
      await fake.waitFor(() => fake.storedLines(spec.deploymentId).length >= stored + 150, 15_000, `150 more lines after drop ${round + 1}`);
    }
    expect(fake.hellos).toBe(4);
    expectCompleteLog(spec.deploymentId);
  });

  it("on SIGTERM closes the connection and exits 0, leaving containers running", async () => {
    fake = await FakeControlPlane.start();
    await startAgent();
    const spec = deploymentSpec(run, "sigterm", image, { env: { SCRIPT: "sleep 600" } });
    fake.desired.set(spec.deploymentId, spec);
    fake.sync();
    await fake.waitFor(() => fake.statuses(spec.deploymentId).some((s) => s.status === "running"), 15_000, "running");
    for (const agent of agents.splice(0)) await agent.stop();
    const before = await inspect(spec.deploymentId);

    // The daemon's own path: runAgentUntilSignal, with the signal delivered by hand.
    let deliver: (signal: string) => void = () => {};
    const stateDir = mkdtempSync(join(tmpdir(), "cm-agent-state-"));
    const exited = runAgentUntilSignal(
      testConfig(fake, run, { stateDir }),
      {
        runtime: new DockerRuntime({ docker: run.docker }),
        hostProbe: fakeHostProbe(),
        socketFactory: wsSocketFactory(),
        clock: systemClock,
        logger: silentLogger,
      },
      (handler) => {
        deliver = handler;
        return () => {};
      },
    );
    await fake.waitFor(() => fake.hellos === 2 && fake.connected, 5_000, "the daemon's connection");
    await fake.waitFor(() => fake.statuses(spec.deploymentId).filter((s) => s.status === "running").length >= 2, 10_000, "its running report");
    expect(readStatusFile(stateDir)).toMatchObject({ state: "ready", nodeId: "node-test", pid: process.pid });
    deliver("SIGTERM");
    deliver("SIGTERM"); // a second signal changes nothing
    expect(await exited).toBe(0);
    await fake.waitFor(() => !fake.connected, 5_000, "the closed connection");
    expect(await inspect(spec.deploymentId)).toEqual(before);
    expect(readStatusFile(stateDir)).toMatchObject({ state: "disconnected" });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it("exits 78 (do not restart) when the control plane rejects the token, and says why in the status file", async () => {
    fake = await FakeControlPlane.start();
    const stateDir = mkdtempSync(join(tmpdir(), "cm-agent-state-"));
    const code = await runAgentUntilSignal(
      testConfig(fake, run, { stateDir, token: "not-a-known-token" }),
      {
        runtime: new DockerRuntime({ docker: run.docker }),
        hostProbe: fakeHostProbe(),
        socketFactory: wsSocketFactory(),
        clock: systemClock,
        logger: silentLogger,
      },
      () => () => {},
    );
    expect(code).toBe(78);
    expect(readStatusFile(stateDir)?.failure).toMatch(/rejected this agent's token \(close 4401\)/);
    rmSync(stateDir, { recursive: true, force: true });
  });
});
