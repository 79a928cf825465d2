// The agent's connection against a fake control plane on a real socket: hello,
// specs, heartbeats, bad frames, backoff, fatal close codes, half-open links.
// No container is involved, so the engine is the in-memory one, empty: these run without Docker.
import { afterEach, describe, expect, it } from "vitest";
import type { Agent } from "../../src/agent";
import { systemClock } from "../../src/clock";
import type { ConnectionFailure, ConnectionState } from "../../src/connection/connection";
import type { TestAgentOptions } from "../support/agent-harness";
import { fakeHostProbe, startTestAgent as startAgent, testGpu } from "../support/agent-harness";
import { dockerTestRun } from "../support/docker-test-run";
import { FakeControlPlane, TEST_NODE_ID } from "../support/fake-control-plane";
import { MemoryRuntime } from "../support/memory-runtime";

// Only for its container labels: nothing here reaches the engine.
const run = dockerTestRun();
const startTestAgent = (fake: FakeControlPlane, options: TestAgentOptions = {}) =>
  startAgent(fake, run, { runtime: new MemoryRuntime(systemClock), ...options });
let fake: FakeControlPlane;
let agent: Agent | undefined;

afterEach(async () => {
  await agent?.stop();
  agent = undefined;
  await fake?.stop();
});

function statesOf(agent: Agent): ConnectionState[] {
  const states: ConnectionState[] = [agent.state];
  agent.connection.onStateChange((state) => states.push(state));
  return states;
}

describe("agent connection", () => {
  it("says hello, sends specs with GPUs and their warning, then heartbeats at the welcome's interval", async () => {
    fake = await FakeControlPlane.start({ heartbeatIntervalMs: 150 });
    agent = await startTestAgent(fake, { hostProbe: fakeHostProbe([testGpu(0)], "GPU 1 fell off the bus") });

    const hello = await fake.waitFor(() => fake.of("hello")[0], 5_000, "hello");
    expect(hello).toMatchObject({ token: "test-token", protocolVersions: [1] });
    expect(hello.agentVersion).toMatch(/^\d+\.\d+\.\d+/);
    await fake.waitFor(() => agent?.state === "ready", 5_000, "ready");
    expect(agent.connection.welcome?.nodeId).toBe(TEST_NODE_ID);

    const specs = await fake.waitFor(() => fake.of("specs")[0], 5_000, "specs");
    expect(specs.specs).toMatchObject({ cpuModel: "Test CPU", cpuThreads: 2, ramMb: 4096 });
    expect(specs.gpus).toEqual([expect.objectContaining({ index: 0, uuid: "GPU-test-0", name: "Test GPU", vramMb: 24_576 })]);
    expect(specs.gpuWarning).toBe("GPU 1 fell off the bus");

    const before = Date.now();
    await fake.waitFor(() => fake.of("heartbeat").length >= 3, 5_000, "three heartbeats");
    const heartbeats = fake.of("heartbeat");
    expect(heartbeats[0]).toMatchObject({ running: [] });
    expect(heartbeats[0]!.sentAt).toBeGreaterThan(before - 1_000);
    expect(Date.now() - before).toBeGreaterThanOrEqual(2 * 150 - 50);
    expect(fake.badFrames).toEqual([]);
  });

  it("answers frames that do not parse with an error frame and carries on", async () => {
    fake = await FakeControlPlane.start();
    agent = await startTestAgent(fake);
    await fake.waitFor(() => agent?.state === "ready", 5_000, "ready");

    fake.sendRaw("this is not json");
    fake.send({ type: "command", commandId: "c1", action: "explode" });
    fake.send({ type: "no-such-frame" });
    fake.sendRaw(JSON.stringify({ type: "logs_ack", deploymentId: "d", cursor: { seq: -1, dockerTs: null } }));

    const errors = await fake.waitFor(() => (fake.of("error").length >= 4 ? fake.of("error") : undefined), 5_000, "four error frames");
    expect(errors.map((e) => e.code)).toEqual(["BAD_FRAME", "BAD_FRAME", "BAD_FRAME", "BAD_FRAME"]);
    expect(errors[0]!.message).toBe("frame is not JSON");
    expect(errors[1]!.message).toContain("action");
    expect(agent.state).toBe("ready");
    const heartbeats = fake.of("heartbeat").length;
    await fake.waitFor(() => fake.of("heartbeat").length > heartbeats, 5_000, "a heartbeat after the bad frames");
    expect(fake.hellos).toBe(1);
  });

  it("backs off and reconnects when the control plane goes away and comes back", async () => {
    fake = await FakeControlPlane.start();
    agent = await startTestAgent(fake);
    await fake.waitFor(() => agent?.state === "ready", 5_000, "ready");
    // The first specs must have reached the fake before it goes: the agent sends them right after
    // welcome, and a stop in between would cut them off in flight (CI saw it), not test the reconnect.
    await fake.waitFor(() => fake.of("specs").length >= 1, 5_000, "specs");
    const states = statesOf(agent);

    await fake.stop();
    await fake.waitFor(() => states.filter((s) => s === "backoff").length >= 3, 10_000, "three failed attempts");
    expect(states).toContain("connecting");
    expect(agent.state).not.toBe("ready");

    await fake.restart();
    await fake.waitFor(() => agent?.state === "ready", 10_000, "ready again");
    expect(fake.hellos).toBe(2);
    expect(states.slice(0, 4)).toEqual(["ready", "backoff", "connecting", "backoff"]);
    await fake.waitFor(() => fake.of("specs").length >= 2, 5_000, "specs again after the reconnect");
  });

  it.each([
    [4401, /rejected this agent's token/],
    [4409, /another agent using the same token/],
    [4406, /Upgrade the agent/],
  ])("stops retrying after close code %i", async (code, explanation) => {
    fake = await FakeControlPlane.start();
    fake.refuseNextWith = code;
    agent = await startTestAgent(fake);
    const failures: ConnectionFailure[] = [];
    agent.onFailure((failure) => failures.push(failure));

    await fake.waitFor(() => agent?.state === "failed", 5_000, "failed");
    expect(failures).toEqual([expect.objectContaining({ closeCode: code, explanation: expect.stringMatching(explanation) })]);
    await new Promise((resolve) => setTimeout(resolve, 800)); // several backoff periods
    expect(fake.hellos).toBe(1);
    expect(agent.state).toBe("failed");
  });

  it("stops retrying when a newer agent with the same token takes over", async () => {
    fake = await FakeControlPlane.start();
    agent = await startTestAgent(fake);
    await fake.waitFor(() => agent?.state === "ready", 5_000, "ready");
    const second = await startTestAgent(fake);
    try {
      await fake.waitFor(() => agent?.state === "failed", 5_000, "the first agent gives up");
      await fake.waitFor(() => second.state === "ready", 5_000, "the second agent is ready");
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(fake.hellos).toBe(2);
    } finally {
      await second.stop();
    }
  });

  it("notices a half-open connection by its missing pongs and reconnects", async () => {
    fake = await FakeControlPlane.start({ heartbeatIntervalMs: 10_000 });
    agent = await startTestAgent(fake);
    await fake.waitFor(() => agent?.state === "ready", 5_000, "ready");
    const states = statesOf(agent);

    fake.freezeAgent();
    await fake.waitFor(() => fake.hellos === 2 && agent?.state === "ready", 10_000, "a new connection");
    expect(states).toEqual(expect.arrayContaining(["backoff", "connecting", "authenticating", "ready"]));
  });

  it("closes with 1001 on stop and does not come back", async () => {
    fake = await FakeControlPlane.start();
    agent = await startTestAgent(fake);
    await fake.waitFor(() => agent?.state === "ready", 5_000, "ready");
    const closed = new Promise<number>((resolve) => {
      for (const client of (fake as unknown as { wss: { clients: Set<import("ws").WebSocket> } }).wss.clients) client.once("close", (code) => resolve(code));
    });
    await agent.stop();
    expect(await closed).toBe(1001);
    expect(agent.state).toBe("disconnected");
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(fake.hellos).toBe(1);
    agent = undefined;
  });
});
