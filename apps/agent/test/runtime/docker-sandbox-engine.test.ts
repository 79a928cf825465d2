// DockerSandboxEngine keeps the sandbox engine contract on real Docker; the
// in-memory engine the pool's tests use keeps the same (memory-sandbox-engine.test.ts).
import { needs } from "@cm/testkit";
import { afterAll } from "vitest";
import { DockerSandboxEngine } from "../../src/runtime/docker-sandbox-engine";
import { silentLogger } from "../../src/runtime/logger";
import { ensureBusyboxImage } from "../support/busybox-image";
import { dockerTestRun } from "../support/docker-test-run";
import { sandboxEngineContract } from "../support/sandbox-engine-contract";

const run = dockerTestRun();
afterAll(async () => {
  await run.cleanup();
});

needs("docker", "busybox").describe("DockerSandboxEngine keeps the sandbox engine contract", () => {
  const engine = new DockerSandboxEngine(run.docker, silentLogger);
  sandboxEngineContract(() => ({
    engine,
    labels: run.labels,
    async join(sandbox) {
      await run.docker.createContainer({ Image: ensureBusyboxImage(), Cmd: ["true"], Labels: { ...run.labels, "cm.sandbox-name": sandbox } });
    },
    async stopOutOfBand(name) {
      await run.docker.getContainer(name).stop({ t: 0 });
    },
    async removeOutOfBand(name) {
      await run.docker.getContainer(name).remove({ force: true });
    },
  }));
});
