// Lines a container writes while its agent is away are shipped when the agent
// returns, even when the deployment is no longer wanted by then: the agent stops
// the container, sends its log to the end and only then removes it and reports.
import { needs } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import type { Agent } from "../../src/agent";
import { deploymentSpec, startTestAgent } from "../support/agent-harness";
import { dockerTestRun } from "../support/docker-test-run";
import { FakeControlPlane } from "../support/fake-control-plane";
import { ensureScriptImage } from "../support/script-image";

const run = dockerTestRun();
let image = "";
let fake: FakeControlPlane;
const agents: Agent[] = [];

const COUNTER = 'trap "exit 0" TERM; i=1; while true; do echo "line $i"; i=$((i+1)); usleep 2000; done';

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

async function startAgent(): Promise<Agent> {
  const agent = await startTestAgent(fake, run);
  agents.push(agent);
  await fake.waitFor(() => agent.state === "ready", 5_000, "ready");
  return agent;
}

async function containerId(deploymentId: string): Promise<string> {
  return (await runProgram("docker", ["ps", "-aq", "--filter", `label=cm.deployment-id=${deploymentId}`])).trim();
}

async function dockerLineCount(id: string): Promise<number> {
  return (await dockerLogLines(id)).length;
}

async function dockerLogLines(id: string): Promise<string[]> {
  return (await runProgram("docker", ["logs", id])).split("\n").filter(Boolean);
}

/** Every stored line is "line <seq>", from 1: nothing lost, nothing twice. */
function expectComplete(deploymentId: string): number {
  const lines = fake.storedLines(deploymentId);
  const broken = lines.findIndex((line, i) => line.seq !== i + 1 || line.message !== `line ${i + 1}`);
  expect(broken, `line ${broken}: ${JSON.stringify(lines[broken])}`).toBe(-1);
  expect(fake.duplicateLines).toBe(0);
  return lines.length;
}

/** Runs the counter under one agent, stops that agent, and lets the container write on alone. */
async function counterLeftAlone(suffix: string) {
  fake = await FakeControlPlane.start();
  const first = await startAgent();
  const spec = deploymentSpec(run, suffix, image, { env: { SCRIPT: COUNTER } });
  fake.desired.set(spec.deploymentId, spec);
  fake.sync();
  await fake.waitFor(() => fake.storedLines(spec.deploymentId).length >= 100, 15_000, "100 lines");
  await first.stop();
  agents.splice(agents.indexOf(first), 1);
  const atDeath = fake.storedLines(spec.deploymentId).length;
  // The agent is away; the container writes on (slowly on a busy machine).
  const id = await containerId(spec.deploymentId);
  await expect.poll(() => dockerLineCount(id), { timeout: 20_000, message: "200 lines written while the agent is away" }).toBeGreaterThanOrEqual(atDeath + 200);
  return { spec, atDeath };
}

needs("docker", "busybox").describe("lines written while the agent is away", () => {
  it("are shipped to the end before a deployment stopped meanwhile is reported stopped", async () => {
    const { spec, atDeath } = await counterLeftAlone("stopped");
    fake.desired.set(spec.deploymentId, { ...spec, desiredState: "stopped" });
    const id = await containerId(spec.deploymentId);
    const startedAt = Date.now();
    await startAgent();
    await fake.waitFor(() => fake.statuses(spec.deploymentId).some((s) => s.status === "stopped"), 20_000, "stopped");
    const convergedMs = Date.now() - startedAt;
    const written = (await dockerLogLines(id)).length;
    const stored = expectComplete(spec.deploymentId);
    console.log(
      `stopped while away: ${atDeath} lines stored at the agent's death, ${written} written, ${stored} stored, lost ${written - stored}; reported stopped ${convergedMs} ms after the agent started`,
    );
    expect(written).toBeGreaterThan(atDeath + 100);
    expect(stored).toBe(written);
  });

  it("are shipped to the end before a deployment deleted meanwhile is removed", async () => {
    const { spec, atDeath } = await counterLeftAlone("removed");
    fake.desired.set(spec.deploymentId, { ...spec, desiredState: "removed" });
    const writtenBefore = (await dockerLogLines(await containerId(spec.deploymentId))).length;
    await startAgent();
    await fake.waitFor(() => fake.statuses(spec.deploymentId).some((s) => s.status === "removed"), 20_000, "removed");
    expect(await containerId(spec.deploymentId)).toBe("");
    const stored = expectComplete(spec.deploymentId);
    console.log(`deleted while away: ${atDeath} lines stored at the agent's death, at least ${writtenBefore} written, ${stored} stored`);
    expect(writtenBefore).toBeGreaterThan(atDeath + 100);
    expect(stored).toBeGreaterThanOrEqual(writtenBefore);
  });

  it("are not lost when the connection drops while they go out: the container is removed only once they are stored", async () => {
    const { spec, atDeath } = await counterLeftAlone("dropped");
    fake.desired.set(spec.deploymentId, { ...spec, desiredState: "removed" });
    const writtenBefore = await dockerLineCount(await containerId(spec.deploymentId));
    fake.storeLogs = false; // the batches of the final drain go unanswered...
    const logFramesBefore = fake.of("logs").length;
    await startAgent();
    await fake.waitFor(() => fake.of("logs").length > logFramesBefore, 10_000, "the final drain under way");
    fake.closeAgent(1012, "restarting"); // ...and the connection drops under them
    fake.storeLogs = true;
    await fake.waitFor(() => fake.statuses(spec.deploymentId).some((s) => s.status === "removed"), 20_000, "removed");
    expect(await containerId(spec.deploymentId)).toBe("");
    const stored = expectComplete(spec.deploymentId);
    expect(writtenBefore).toBeGreaterThan(atDeath + 100);
    expect(stored).toBeGreaterThanOrEqual(writtenBefore);
  });
});
