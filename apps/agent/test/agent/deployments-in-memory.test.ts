// The whole agent (connection, reconciler, log shipping, heartbeats) against the
// fake control plane on a real socket, with the in-memory engine in place of
// Docker: what goes over the wire for syncs and commands, without an engine.
// The same flows on real Docker are in deployments.test.ts.
import { CLOSE_CODES } from "@cm/protocol";
import { afterEach, expect, it } from "vitest";
import type { Agent } from "../../src/agent";
import { systemClock } from "../../src/clock";
import { deploymentSpec, startTestAgent } from "../support/agent-harness";
import { dockerTestRun } from "../support/docker-test-run";
import { FakeControlPlane, TEST_NODE_ID } from "../support/fake-control-plane";
import { MemoryRuntime } from "../support/memory-runtime";

// Only for its labels and deployment ids: nothing here reaches an engine.
const run = dockerTestRun();
const IMAGE = "registry.example/app:1";
let fake: FakeControlPlane;
let agent: Agent | undefined;

afterEach(async () => {
  await agent?.stop();
  agent = undefined;
  await fake?.stop();
});

async function connect(engine: MemoryRuntime): Promise<Agent> {
  fake = await FakeControlPlane.start();
  agent = await startTestAgent(fake, run, { runtime: engine });
  await fake.waitFor(() => agent?.state === "ready", 5_000, "ready");
  return agent;
}

const statusesOf = (deploymentId: string) => fake.statuses(deploymentId).map((s) => `${s.runSeq}:${s.status}`);
const ackOf = (commandId: string) => fake.waitFor(() => fake.of("ack").find((a) => a.commandId === commandId), 5_000, `the ack of ${commandId}`);

it("keeps sandboxes warm for the node it was welcomed as, and stops when the agent stops", async () => {
  const engine = new MemoryRuntime(systemClock);
  const running = await connect(engine);
  expect(engine.warmingFor).toMatchObject({ nodeId: TEST_NODE_ID, labels: run.labels });
  await running.stop();
  agent = undefined;
  expect(engine.warmingFor).toBeUndefined();
});

it("retired while it was away: refused at hello with 4410, it removes the node's containers and sandboxes and stops", async () => {
  const engine = new MemoryRuntime(systemClock).loadImage(IMAGE, { onSigterm: { exitCode: 0, afterMs: 50 } });
  const first = await connect(engine);
  const spec = deploymentSpec(run, "retired", IMAGE);
  fake.desired.set(spec.deploymentId, spec);
  fake.sync();
  await fake.waitFor(() => statusesOf(spec.deploymentId).includes("1:running"), 5_000, "running");
  await first.stop();
  expect(engine.ps().filter((c) => c.state.running)).toHaveLength(1);

  fake.refuseNextWith = CLOSE_CODES.RETIRED;
  const failures: string[] = [];
  agent = await startTestAgent(fake, run, { runtime: engine });
  agent.onFailure((failure) => failures.push(failure.explanation));
  const retired = new Promise<void>((done) => agent!.onRetired(done));
  await retired;
  expect(engine.ps()).toEqual([]);
  expect(engine.warmingFor).toBeUndefined();
  expect(failures).toEqual([]);
  expect(fake.hellos).toBe(2); // no retry after 4410
});

it("starts what a sync asks for, reports it, ships its log and names it in heartbeats", async () => {
  const engine = new MemoryRuntime(systemClock).loadImage(IMAGE, { output: ["ready on :8080"] });
  await connect(engine);
  const spec = deploymentSpec(run, "sync", IMAGE, { ports: [8080] });
  fake.desired.set(spec.deploymentId, spec);
  fake.sync();

  await fake.waitFor(() => statusesOf(spec.deploymentId).includes("1:running"), 5_000, "running");
  expect(statusesOf(spec.deploymentId)).toEqual(["1:starting", "1:running"]);
  expect(engine.ps().map((c) => c.state.labels["cm.node-id"])).toEqual([TEST_NODE_ID]);
  await fake.waitFor(() => fake.storedLines(spec.deploymentId).length === 1, 5_000, "the log line");
  expect(fake.storedLines(spec.deploymentId)[0]).toMatchObject({ seq: 1, stream: "stdout", message: "ready on :8080" });
  await fake.waitFor(() => fake.of("heartbeat").some((h) => h.running?.includes(spec.deploymentId)), 5_000, "a heartbeat naming it");
});

it("acknowledges stop, start and remove commands once each is done, and reports each state", async () => {
  const engine = new MemoryRuntime(systemClock).loadImage(IMAGE, { onSigterm: { exitCode: 0, afterMs: 50 } });
  await connect(engine);
  const spec = deploymentSpec(run, "cmds", IMAGE);

  expect(await ackOf(fake.command("create", spec))).toMatchObject({ ok: true });
  expect(await ackOf(fake.command("stop", { ...spec, desiredState: "stopped" }))).toMatchObject({ ok: true });
  expect(engine.ps().map((c) => [c.signals, c.state.exitCode])).toEqual([[["SIGTERM"], 0]]);
  expect(await ackOf(fake.command("start", { ...spec, runSeq: 2 }))).toMatchObject({ ok: true });
  expect(engine.ps().map((c) => [c.name, c.state.running])).toEqual([[`cm-${spec.deploymentId}-run2`, true]]);
  expect(await ackOf(fake.command("remove", { ...spec, runSeq: 2, desiredState: "removed" }))).toMatchObject({ ok: true });
  expect(engine.ps()).toEqual([]);
  expect(statusesOf(spec.deploymentId)).toEqual(["1:starting", "1:running", "1:stopped", "2:starting", "2:running", "2:removed"]);
});

it("answers a command it cannot carry out with the reason it reports", async () => {
  await connect(new MemoryRuntime(systemClock));
  const spec = deploymentSpec(run, "missing", "registry.example/missing:1");
  const ack = await ackOf(fake.command("create", spec));
  expect(ack.ok).toBe(false);
  expect(ack.error).toBe(fake.statuses(spec.deploymentId).at(-1)?.reason);
  expect(statusesOf(spec.deploymentId)).toEqual(["1:pulling", "1:failed"]);
});

it("after the control plane comes back, ships what the container wrote meanwhile, once", async () => {
  const engine = new MemoryRuntime(systemClock).loadImage(IMAGE);
  await connect(engine);
  const spec = deploymentSpec(run, "away", IMAGE);
  await ackOf(fake.command("create", spec));
  const name = `cm-${spec.deploymentId}-run1`;
  for (let i = 1; i <= 20; i++) engine.write(name, `line ${i}`);
  await fake.waitFor(() => fake.storedLines(spec.deploymentId).length === 20, 5_000, "20 lines");

  await fake.stop();
  for (let i = 21; i <= 50; i++) engine.write(name, `line ${i}`);
  await fake.restart();
  await fake.waitFor(() => fake.storedLines(spec.deploymentId).length === 50, 10_000, "all 50 lines");
  expect(fake.storedLines(spec.deploymentId).map((l) => `${l.seq} ${l.message}`)).toEqual(Array.from({ length: 50 }, (_, i) => `${i + 1} line ${i + 1}`));
  expect(fake.duplicateLines).toBe(0);
});

it("reconciles a sync sent in parts once, with all of them: what an early part names is not removed as unknown", async () => {
  const engine = new MemoryRuntime(systemClock).loadImage(IMAGE, { output: ["up"] });
  await connect(engine);
  const first = deploymentSpec(run, "part-1", IMAGE);
  const second = deploymentSpec(run, "part-2", IMAGE);
  fake.send({ type: "sync", deployments: [first], more: true });
  // Nothing happens until the last part: a part alone is not the node's whole state.
  await new Promise((r) => setTimeout(r, 300));
  expect(fake.statuses(first.deploymentId)).toEqual([]);
  fake.send({ type: "sync", deployments: [second] });
  await fake.waitFor(
    () => statusesOf(first.deploymentId).includes("1:running") && statusesOf(second.deploymentId).includes("1:running"),
    5_000,
    "both running",
  );
  // A later sync in two parts naming both leaves both running.
  fake.send({ type: "sync", deployments: [second], more: true });
  fake.send({ type: "sync", deployments: [first] });
  await new Promise((r) => setTimeout(r, 500));
  expect(engine.ps().map((c) => [c.state.deploymentId, c.state.running])).toEqual([
    [first.deploymentId, true],
    [second.deploymentId, true],
  ]);
});
