// The in-memory engine keeps the contract DockerRuntime keeps on real Docker
// (docker-containers.test.ts runs the same cases there), so what the agent's
// tests learn on it holds on an engine.
import { describe } from "vitest";
import type { ContainerSpec } from "../../src/runtime/types";
import { FakeClock } from "../support/fake-clock";
import { MemoryRuntime } from "../support/memory-runtime";
import type { Program } from "../support/runtime-contract";
import { runtimeContract } from "../support/runtime-contract";

describe("MemoryRuntime keeps the engine contract", () => {
  runtimeContract(() => {
    const clock = new FakeClock();
    const runtime = new MemoryRuntime(clock);
    const labels = { "cm.test": "contract" };
    return {
      runtime,
      labels,
      missingImage: "registry.example/missing:1",
      spec(suffix: string, program: Program): ContainerSpec {
        // One image per program: in memory, what a container does comes with its image.
        const image = `memory/${suffix}:1`;
        runtime.loadImage(image, {
          ...(program.stdout ? { output: program.stdout } : {}),
          ...(program.stderr ? { errorOutput: program.stderr } : {}),
          ...(program.exitCode !== undefined ? { exitCode: program.exitCode } : {}),
          ...(program.onSigterm ? { onSigterm: program.onSigterm } : {}),
        });
        return {
          deploymentId: `dep_${suffix}`,
          nodeId: "node_contract",
          userId: "usr_contract",
          image,
          env: {},
          exposedPorts: [],
          cpuCores: 1,
          memoryMb: 64,
          gpuDeviceIds: [],
          labels,
        };
      },
      async during<T>(work: Promise<T>): Promise<T> {
        let done = false;
        const result = work.finally(() => (done = true));
        await clock.advanceUntil(() => done, "the engine's work");
        return result;
      },
    };
  });
});
