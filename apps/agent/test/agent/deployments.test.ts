// Deployments end to end on the real Docker engine: a fake control plane sends
// sync and commands, the agent makes containers and reports what happened.

import { needs } from "@cm/testkit";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import type { Agent } from "../../src/agent";
import { deploymentSpec, fakeHostProbe, startTestAgent } from "../support/agent-harness";
import { dockerTestRun } from "../support/docker-test-run";
import { eventually } from "../support/eventually";
import { FakeControlPlane, TEST_NODE_ID } from "../support/fake-control-plane";
import { ensureScriptImage } from "../support/script-image";

const run = dockerTestRun();
let image = "";
let fake: FakeControlPlane;
let agent: Agent;

beforeAll(() => {
  image = ensureScriptImage();
});
afterEach(async () => {
  await agent?.stop();
  await fake?.stop();
});
afterAll(async () => {
  await run.cleanup();
});

async function connect(): Promise<void> {
  fake = await FakeControlPlane.start();
  agent = await startTestAgent(fake, run);
  await fake.waitFor(() => agent.state === "ready", 5_000, "ready");
}

const statusesOf = (id: string) => fake.statuses(id).map((s) => s.status);

async function containersOf(deploymentId: string) {
  return run.docker.listContainers({ all: true, filters: { label: [`cm.deployment-id=${deploymentId}`] } });
}

needs("docker", "busybox").describe("deployments", () => {
  it("creates and starts a hardened, labelled container from a sync, reports starting then running, and ships its log", async () => {
    await connect();
    const script = "for i in 1 2 3 4 5; do echo line $i; done; echo oops >&2; sleep 600";
    const spec = deploymentSpec(run, "sync", image, { env: { SCRIPT: script, GREETING: "hi" }, ports: [8080], cpuCores: 0.5, memoryMb: 128 });
    fake.desired.set(spec.deploymentId, spec);
    fake.sync();

    await fake.waitFor(() => statusesOf(spec.deploymentId).includes("running"), 15_000, "running");
    expect(statusesOf(spec.deploymentId)).toEqual(["starting", "running"]); // the image is local: no pulling
    const running = fake.statuses(spec.deploymentId)[1]!;
    expect(running).toMatchObject({ runSeq: 1, at: expect.any(Number) });
    expect(fake.of("pull_progress")).toEqual([]);

    const [listed] = await containersOf(spec.deploymentId);
    const info = await run.docker.getContainer(listed!.Id).inspect();
    expect(info.Config.Labels).toMatchObject({
      "cm.managed": "true",
      "cm.deployment-id": spec.deploymentId,
      "cm.node-id": TEST_NODE_ID,
      "cm.user-id": "user-sync",
      "cm.run-seq": "1",
      "cm.gpus": "",
    });
    expect(info.Config.Env).toEqual(expect.arrayContaining(["GREETING=hi"]));
    expect(info.Config.Labels["cm.ports"]).toBe("8080");
    expect(info.HostConfig.NetworkMode).toMatch(/^container:[0-9a-f]{64}$/);
    expect(info.HostConfig).toMatchObject({
      Privileged: false,
      CapDrop: ["ALL"],
      SecurityOpt: ["no-new-privileges"],
      NanoCpus: 500_000_000,
      Memory: 128 * 1024 * 1024,
      RestartPolicy: { Name: "no" },
    });
    expect(info.Name).toBe(`/cm-${spec.deploymentId}-run1`);

    await fake.waitFor(() => fake.storedLines(spec.deploymentId).length >= 6, 10_000, "six log lines");
    const lines = fake.storedLines(spec.deploymentId);
    expect(lines.map((l) => l.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(lines.filter((l) => l.stream === "stdout").map((l) => l.message)).toEqual(["line 1", "line 2", "line 3", "line 4", "line 5"]);
    expect(lines.find((l) => l.stream === "stderr")?.message).toBe("oops");
    for (const line of lines) expect(line.ts).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d+Z$/);
    await fake.waitFor(() => fake.of("heartbeat").some((h) => h.running?.includes(spec.deploymentId)), 5_000, "a heartbeat naming it");

    // Converging again changes nothing: same container, still running, no new log lines.
    const statusCount = fake.statuses(spec.deploymentId).length;
    fake.sync();
    await fake.waitFor(() => fake.statuses(spec.deploymentId).length > statusCount, 5_000, "the re-report");
    await agent.reconciler.idle();
    expect(statusesOf(spec.deploymentId).at(-1)).toBe("running");
    const after = await containersOf(spec.deploymentId);
    expect(after.map((c) => c.Id)).toEqual([listed!.Id]);
    expect((await run.docker.getContainer(listed!.Id).inspect()).State.StartedAt).toBe(info.State.StartedAt);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(fake.storedLines(spec.deploymentId)).toHaveLength(6);
    expect(fake.duplicateLines).toBe(0);
  });

  it("stops on a stop command, reports stopped and acks; removes container and network on remove", async () => {
    await connect();
    const spec = deploymentSpec(run, "stop", image, { env: { SCRIPT: "echo up; sleep 600" } });
    const created = fake.command("create", spec);
    await fake.waitFor(() => fake.of("ack").find((a) => a.commandId === created), 15_000, "the create ack");
    expect(fake.of("ack").find((a) => a.commandId === created)).toMatchObject({ ok: true });
    expect(statusesOf(spec.deploymentId)).toEqual(["starting", "running"]);
    const [container] = await containersOf(spec.deploymentId);
    const sandbox = container!.Labels["cm.sandbox-name"]!;
    expect((await run.docker.getNetwork(sandbox).inspect()).Name).toBe(sandbox);

    const stopped = fake.command("stop", { ...spec, desiredState: "stopped" });
    const ack = await fake.waitFor(() => fake.of("ack").find((a) => a.commandId === stopped), 15_000, "the stop ack");
    expect(ack).toEqual({ type: "ack", commandId: stopped, ok: true });
    expect(statusesOf(spec.deploymentId)).toEqual(["starting", "running", "stopped"]);
    expect((await run.docker.getContainer(container!.Id).inspect()).State.Running).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(statusesOf(spec.deploymentId)).not.toContain("exited"); // a stop is not a crash
    expect(agent.reconciler.running()).toEqual([]);

    const removed = fake.command("remove", { ...spec, desiredState: "removed" });
    await fake.waitFor(() => fake.of("ack").find((a) => a.commandId === removed), 15_000, "the remove ack");
    expect(statusesOf(spec.deploymentId).at(-1)).toBe("removed");
    expect(await containersOf(spec.deploymentId)).toEqual([]);
    await expect(run.docker.getContainer(sandbox).inspect()).rejects.toMatchObject({ statusCode: 404 });
    await expect(run.docker.getNetwork(sandbox).inspect()).rejects.toMatchObject({ statusCode: 404 });
  });

  it("starts a new container for a new run and removes the old one", async () => {
    await connect();
    const spec = deploymentSpec(run, "rerun", image, { env: { SCRIPT: "echo run; sleep 600" } });
    fake.command("create", spec);
    await fake.waitFor(() => statusesOf(spec.deploymentId).includes("running"), 15_000, "running");
    fake.command("stop", { ...spec, desiredState: "stopped" });
    await fake.waitFor(() => statusesOf(spec.deploymentId).includes("stopped"), 15_000, "stopped");
    const [first] = await containersOf(spec.deploymentId);

    const again = fake.command("start", { ...spec, runSeq: 2 });
    await fake.waitFor(() => fake.of("ack").find((a) => a.commandId === again), 15_000, "the start ack");
    const reports = fake.statuses(spec.deploymentId);
    expect(reports.at(-1)).toMatchObject({ status: "running", runSeq: 2 });
    const now = await containersOf(spec.deploymentId);
    expect(now).toHaveLength(1);
    expect(now[0]!.Id).not.toBe(first!.Id);
    expect(now[0]!.Labels["cm.run-seq"]).toBe("2");
    // Both runs' lines, numbered on from the first run's.
    await fake.waitFor(() => fake.storedLines(spec.deploymentId).length >= 2, 10_000, "both runs' lines");
    expect(fake.storedLines(spec.deploymentId).map((l) => [l.seq, l.message])).toEqual([
      [1, "run"],
      [2, "run"],
    ]);
  });

  it("reports failed with a readable reason when the image is missing and cannot be pulled", async () => {
    await connect();
    const spec = deploymentSpec(run, "missing", "cm-test-does-not-exist:nope");
    const commandId = fake.command("create", spec);
    const ack = await fake.waitFor(() => fake.of("ack").find((a) => a.commandId === commandId), 30_000, "the ack");
    expect(ack.ok).toBe(false);
    const statuses = fake.statuses(spec.deploymentId);
    expect(statuses.map((s) => s.status)).toEqual(["pulling", "failed"]);
    expect(statuses[1]!.reason).toMatch(/^image "cm-test-does-not-exist:nope" is not present on this node and could not be pulled: .+/);
    expect(ack.error).toBe(statuses[1]!.reason);
    expect(await containersOf(spec.deploymentId)).toEqual([]);

    // A repeated sync reports the failure again instead of pulling again.
    fake.sync();
    await fake.waitFor(() => fake.statuses(spec.deploymentId).length === 3, 10_000, "the re-report");
    expect(statusesOf(spec.deploymentId)).toEqual(["pulling", "failed", "failed"]);
  });

  it("refuses a GPU deployment when the node has too few free GPUs", async () => {
    fake = await FakeControlPlane.start();
    agent = await startTestAgent(fake, run, { hostProbe: fakeHostProbe([]) });
    await fake.waitFor(() => agent.state === "ready", 5_000, "ready");
    const spec = deploymentSpec(run, "gpu", image, { env: { SCRIPT: "sleep 600" }, gpuCount: 1 });
    fake.command("create", spec);
    const failed = await fake.waitFor(() => fake.statuses(spec.deploymentId).find((s) => s.status === "failed"), 15_000, "failed");
    expect(failed.reason).toBe("this deployment needs 1 GPU but this node has 0");
    expect(await containersOf(spec.deploymentId)).toEqual([]);
  });

  it("reports a container that exits by itself with its exit code, after its last log lines", async () => {
    await connect();
    const spec = deploymentSpec(run, "exit3", image, { env: { SCRIPT: "echo about to fail; sleep 1; exit 3" } });
    fake.command("create", spec);
    const exited = await fake.waitFor(() => fake.statuses(spec.deploymentId).find((s) => s.status === "exited"), 15_000, "exited");
    expect(exited).toMatchObject({ runSeq: 1, exitCode: 3, reason: "the container exited with code 3" });
    expect(statusesOf(spec.deploymentId)).toEqual(["starting", "running", "exited"]);
    expect(fake.storedLines(spec.deploymentId).map((l) => l.message)).toEqual(["about to fail"]);
    expect(agent.reconciler.running()).toEqual([]);

    // A later sync does not restart it: the agent never restarts a run on its own.
    const [container] = await containersOf(spec.deploymentId);
    fake.sync();
    await fake.waitFor(() => fake.statuses(spec.deploymentId).length === 4, 10_000, "the re-report");
    expect(fake.statuses(spec.deploymentId)[3]).toMatchObject({ status: "exited", exitCode: 3 });
    expect((await run.docker.getContainer(container!.Id).inspect()).State.Running).toBe(false);
  });

  it("removes containers of deployments the sync no longer lists", async () => {
    await connect();
    const spec = deploymentSpec(run, "orphan", image, { env: { SCRIPT: "sleep 600" } });
    fake.command("create", spec);
    await fake.waitFor(() => statusesOf(spec.deploymentId).includes("running"), 15_000, "running");
    fake.desired.delete(spec.deploymentId);
    fake.sync();
    await eventually(async () => (await containersOf(spec.deploymentId)).length === 0, 15_000, "the orphan's removal");
    expect(statusesOf(spec.deploymentId)).toEqual(["starting", "running"]); // no reports for what the control plane forgot
  });
});
