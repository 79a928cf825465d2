// A deployment's command and entrypoint on the real Docker engine: the agent
// gives them to Docker as Cmd and Entrypoint, and an image with neither a CMD
// nor a command fails with a reason that names the fix.

import { needs } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import type { Agent } from "../../src/agent";
import { deploymentSpec, startTestAgent } from "../support/agent-harness";
import { ensureBusyboxImage } from "../support/busybox-image";
import { dockerTestRun } from "../support/docker-test-run";
import { FakeControlPlane } from "../support/fake-control-plane";
import { ensureScriptImage, SCRIPT_IMAGE } from "../support/script-image";

const run = dockerTestRun();
// Made with `docker import`: it has no CMD and no ENTRYPOINT, as many hand-made images.
let bare = "";
let fake: FakeControlPlane;
let agent: Agent;

beforeAll(() => {
  bare = ensureBusyboxImage();
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

async function inspectOnly(deploymentId: string) {
  const [listed] = await run.docker.listContainers({ all: true, filters: { label: [`cm.deployment-id=${deploymentId}`] } });
  return run.docker.getContainer(listed!.Id).inspect();
}

needs("docker", "busybox").describe("a deployment's command and entrypoint", () => {
  it("runs the command on an image without CMD: Docker's Cmd is it, and its log shows what it printed", async () => {
    await connect();
    const command = ["sh", "-c", 'echo "hello from $0 with $1"; sleep 600', "the-command", "two words"];
    const spec = deploymentSpec(run, "cmd", bare, { command });
    fake.desired.set(spec.deploymentId, spec);
    fake.sync();

    await fake.waitFor(() => fake.statuses(spec.deploymentId).some((s) => s.status === "running"), 15_000, "running");
    const info = await inspectOnly(spec.deploymentId);
    expect(info.Config.Cmd).toEqual(command);
    await fake.waitFor(() => fake.storedLines(spec.deploymentId).length >= 1, 10_000, "its line");
    expect(fake.storedLines(spec.deploymentId).map((l) => l.message)).toEqual(["hello from the-command with two words"]);
  });

  it("replaces the entrypoint, with the command as its arguments", async () => {
    await connect();
    const spec = deploymentSpec(run, "entry", bare, { entrypoint: ["/bin/sh", "-c"], command: ["echo via entrypoint; sleep 600"] });
    fake.desired.set(spec.deploymentId, spec);
    fake.sync();

    await fake.waitFor(() => fake.statuses(spec.deploymentId).some((s) => s.status === "running"), 15_000, "running");
    const info = await inspectOnly(spec.deploymentId);
    expect(info.Config.Entrypoint).toEqual(["/bin/sh", "-c"]);
    expect(info.Config.Cmd).toEqual(["echo via entrypoint; sleep 600"]);
    await fake.waitFor(() => fake.storedLines(spec.deploymentId).length >= 1, 10_000, "its line");
    expect(fake.storedLines(spec.deploymentId)[0]?.message).toBe("via entrypoint");
  });

  it("tells the control plane, in its specs, which local images have neither a CMD nor an ENTRYPOINT", async () => {
    ensureScriptImage();
    await connect();
    const specs = await fake.waitFor(() => fake.of("specs")[0], 10_000, "specs");
    expect(specs.imagesWithoutCommand).toContain(bare);
    expect(specs.imagesWithoutCommand).not.toContain(SCRIPT_IMAGE);
  });

  it("fails an image with neither a CMD nor a command, saying how to give one, leaves no container, and lists the image at once", async () => {
    await connect();
    await fake.waitFor(() => fake.of("specs")[0], 10_000, "the first specs");
    // Tagged after that report: as an image a deployment has just pulled.
    const late = `cm-test-bare-late:${Date.now()}`;
    await runProgram("docker", ["tag", bare, late]);
    try {
      const spec = deploymentSpec(run, "nocmd", late);
      fake.desired.set(spec.deploymentId, spec);
      fake.sync();

      const failed = await fake.waitFor(() => fake.statuses(spec.deploymentId).find((s) => s.status === "failed"), 15_000, "failed");
      expect(failed.reason).toBe(
        `the image ${late} has no CMD (nor ENTRYPOINT) and the deployment gives no command: give one, e.g. cm deploy --image ${late} -- CMD ARGS..., or "command" in POST /deployments`,
      );
      const left = await run.docker.listContainers({ all: true, filters: { label: [`cm.deployment-id=${spec.deploymentId}`] } });
      expect(left).toEqual([]);
      // The control plane hears of it now, not at the next interval.
      await fake.waitFor(() => fake.of("specs").find((f) => f.imagesWithoutCommand?.includes(late)), 10_000, "specs listing it");
    } finally {
      await runProgram("docker", ["rmi", late]);
    }
  });
});
