// Builds agents the way production does (createAgent with real Docker and a real
// socket), with short timings and a per-test-file container label.
import type { DeploymentSpec } from "@cm/protocol";
import type { Agent } from "../../src/agent";
import { createAgent } from "../../src/agent";
import { systemClock } from "../../src/clock";
import type { AgentConfig, AgentConfigInput } from "../../src/config";
import { parseAgentConfig } from "../../src/config";
import { wsSocketFactory } from "../../src/connection/socket";
import type { HostProbe } from "../../src/host/probe";
import type { GpuInfo } from "../../src/host/types";
import { createLogger, silentLogger } from "../../src/logger";
import type { ContainerRuntime } from "../../src/runtime/container-runtime";
import { DockerRuntime } from "../../src/runtime/docker-runtime";
import type { DockerTestRun } from "./docker-test-run";
import type { FakeControlPlane } from "./fake-control-plane";
import { TEST_TOKEN } from "./fake-control-plane";

export const FAST_TIMING = {
  backoffInitialMs: 50,
  backoffMaxMs: 400,
  stableConnectionMs: 2_000,
  helloTimeoutMs: 3_000,
  pingIntervalMs: 200,
  pongTimeoutMs: 600,
  containerStopTimeoutS: 2,
  logPollMs: 30,
  logIdlePollMaxMs: 300,
};

export function testConfig(fake: FakeControlPlane, run: DockerTestRun, overrides: Partial<AgentConfigInput> = {}): AgentConfig {
  return parseAgentConfig({ controlPlaneUrl: fake.url, token: TEST_TOKEN, containerLabels: run.labels, timing: FAST_TIMING, ...overrides });
}

/** A probe with fixed answers: systeminformation is slow, and there is no GPU here. */
export function fakeHostProbe(gpus: GpuInfo[] = [], warning?: string): HostProbe {
  return {
    specs: async () => ({
      cpuModel: "Test CPU",
      cpuCores: 2,
      cpuThreads: 2,
      ramMb: 4096,
      diskGb: 100,
      diskType: "SSD",
      networkSpeedMbps: 1000,
      os: "Test OS",
      containerVersion: "20.10.24",
    }),
    gpus: async () => ({ gpus, ...(warning ? { warning } : {}) }),
  };
}

export function testGpu(index: number): GpuInfo {
  return {
    index,
    uuid: `GPU-test-${index}`,
    name: "Test GPU",
    vramMb: 24_576,
    computeVersion: "8.9",
    driverVersion: "550.0",
    brand: "GeForce",
    computeCores: 16_384,
    tensorCores: 512,
  };
}

export interface TestAgentOptions {
  config?: Partial<AgentConfigInput>;
  hostProbe?: HostProbe;
  runtime?: ContainerRuntime;
}

export function buildTestAgent(fake: FakeControlPlane, run: DockerTestRun, options: TestAgentOptions = {}): Agent {
  const logger = process.env.AGENT_TEST_LOGS ? createLogger({ level: "debug" }) : silentLogger;
  return createAgent(testConfig(fake, run, options.config), {
    runtime: options.runtime ?? new DockerRuntime({ docker: run.docker }),
    hostProbe: options.hostProbe ?? fakeHostProbe(),
    socketFactory: wsSocketFactory(),
    clock: systemClock,
    logger,
  });
}

export async function startTestAgent(fake: FakeControlPlane, run: DockerTestRun, options: TestAgentOptions = {}): Promise<Agent> {
  const agent = buildTestAgent(fake, run, options);
  await agent.start();
  return agent;
}

/** A desired-running deployment of the script image. */
export function deploymentSpec(run: DockerTestRun, suffix: string, image: string, overrides: Partial<DeploymentSpec> = {}): DeploymentSpec {
  return {
    deploymentId: run.deploymentId(suffix),
    userId: `user-${suffix}`,
    runSeq: 1,
    desiredState: "running",
    image,
    env: {},
    ports: [],
    gpuCount: 0,
    logCursor: { seq: 0, dockerTs: null },
    ...overrides,
  };
}
