// Text the agent did not write (a registry's answer, Docker's, a container's) reaches the
// control plane inside reports it must accept: a refused frame loses the failure, the
// deployment stays `pulling` holding its node, and enough of them close the connection.
// The whole agent against the fake control plane, which parses as the real one does.
import { SpecsFrame } from "@cm/protocol";
import { afterEach, expect, it } from "vitest";
import type { Agent } from "../../src/agent";
import { systemClock } from "../../src/clock";
import type { HostProbe } from "../../src/host/probe";
import { ImageUnavailableError } from "../../src/runtime/errors";
import { deploymentSpec, fakeHostProbe, startTestAgent, testGpu } from "../support/agent-harness";
import { dockerTestRun } from "../support/docker-test-run";
import { FakeControlPlane } from "../support/fake-control-plane";
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

it("reports a pull failure whose registry answered with 3,000 emoji, cut on whole characters, and the control plane accepts it", async () => {
  const registryAnswer = "😀".repeat(3000);
  const engine = new MemoryRuntime(systemClock).failNext("ensureImage", new ImageUnavailableError(IMAGE, registryAnswer));
  fake = await FakeControlPlane.start();
  agent = await startTestAgent(fake, run, { runtime: engine });
  await fake.waitFor(() => agent?.state === "ready", 5_000, "ready");
  const spec = deploymentSpec(run, "emoji", IMAGE);

  const commandId = fake.command("create", spec);
  await fake.waitFor(() => fake.badFrames.length > 0 || fake.of("ack").some((a) => a.commandId === commandId), 5_000, "the ack, or a refused frame");

  expect(fake.badFrames.map((frame) => frame.slice(0, 200))).toEqual([]);
  const failed = fake.statuses(spec.deploymentId).find((s) => s.status === "failed");
  const reason = failed?.reason ?? "";
  const whole = new ImageUnavailableError(IMAGE, registryAnswer).message;
  // As much of it as the wire's 2,000 UTF-16 units hold, ending on a whole emoji.
  expect(whole.startsWith(reason)).toBe(true);
  expect(reason.length).toBeGreaterThan(1997);
  expect(reason.length).toBeLessThanOrEqual(2000);
  expect(reason.endsWith("😀")).toBe(true);
  // The command's error is the same reason, and as long: it is refused no more than the report.
  expect(fake.of("ack").find((a) => a.commandId === commandId)).toMatchObject({ ok: false, error: reason });
});

it("answers a tunnel it cannot open with a reason the control plane accepts, whatever the engine said", async () => {
  const engine = new MemoryRuntime(systemClock).loadImage(IMAGE);
  fake = await FakeControlPlane.start();
  agent = await startTestAgent(fake, run, { runtime: engine });
  await fake.waitFor(() => agent?.state === "ready", 5_000, "ready");

  // No such deployment: the reason names the id it was asked for, here 3,000 lone surrogates and a NUL.
  const deploymentId = `${"\uD83D".repeat(3000)}\0`;
  fake.send({ type: "open_tunnel", tunnelId: "tun-hostile", deploymentId, port: 80 });
  await fake.waitFor(() => fake.badFrames.length > 0 || fake.of("tunnel_error").length > 0, 5_000, "the tunnel error, or a refused frame");

  expect(fake.badFrames.map((frame) => frame.slice(0, 200))).toEqual([]);
  expect(fake.of("tunnel_error")[0]?.reason).toMatch(/^[^\0\uD800-\uDFFF]{1,2000}$/);
});

it("reports hardware whose labels carry control characters: each run of them a space, and the catalogue takes it", async () => {
  // A driver's or firmware's strings are shown in tenants' terminals, so the control plane refuses them with control characters.
  const specs = { cpuModel: "AMD\tEPYC 7763\u001b[0m ", os: "Ubuntu 22.04\r\n(6.8.0)" };
  const gpu = { ...testGpu(0), name: "NVIDIA H100\u009b", driverVersion: "550.54.15\u202e" };
  const probe = fakeHostProbe([gpu]);
  const hostProbe: HostProbe = { ...probe, specs: async () => ({ ...(await probe.specs()), ...specs }) };
  fake = await FakeControlPlane.start();
  agent = await startTestAgent(fake, run, { runtime: new MemoryRuntime(systemClock), hostProbe });

  const sent = await fake.waitFor(() => fake.of("specs")[0], 5_000, "specs");
  expect(fake.badFrames.map((frame) => frame.slice(0, 200))).toEqual([]);
  // Only the control characters go: what followed an ESC is plain text then.
  expect(sent.specs).toMatchObject({ cpuModel: "AMD EPYC 7763 [0m", os: "Ubuntu 22.04 (6.8.0)", cpuThreads: 2 });
  expect(sent.gpus[0]).toMatchObject({ name: "NVIDIA H100", driverVersion: "550.54.15", vramMb: 24_576 });
  // The same labels as they came are refused: what the agent must not send.
  expect(SpecsFrame.safeParse({ ...sent, specs: { ...sent.specs, ...specs } }).success).toBe(false);
});
