// Faults of the sandbox pool found after it shipped (issue 19), on the real Docker engine.

import { needs } from "@cm/testkit";
import { afterAll, expect, it, onTestFinished } from "vitest";
import { DockerSandboxEngine } from "../../src/runtime/docker-sandbox-engine";
import { silentLogger } from "../../src/runtime/logger";
import { SandboxPool, type SandboxPoolOptions } from "../../src/runtime/sandboxes";
import { dockerTestRun } from "../support/docker-test-run";
import { eventually } from "../support/eventually";

const run = dockerTestRun();
/** The pool as the agent wires it, on `docker`. */
const dockerPool = (docker: typeof run.docker, poolSize: number, options: SandboxPoolOptions = {}) =>
  new SandboxPool(new DockerSandboxEngine(docker, silentLogger), silentLogger, poolSize, options);
afterAll(async () => {
  await run.cleanup();
});

const ownerFor = (nodeId: string) => ({ nodeId, labels: run.labels });

async function sandboxesOf(nodeId: string) {
  const listed = await run.docker.listContainers({
    all: true,
    filters: { label: [`cm.sandbox=true`, `cm.node-id=${nodeId}`, `cm.test-run=${run.labels["cm.test-run"]}`] },
  });
  return listed.map((c) => ({ name: c.Names[0]!.slice(1), running: c.State === "running" })).sort((a, b) => a.name.localeCompare(b.name));
}

async function networksOf(nodeId: string) {
  const listed = await run.docker.listNetworks({ filters: { label: [`cm.node-id=${nodeId}`, `cm.test-run=${run.labels["cm.test-run"]}`] } });
  return listed.map((n) => n.Name).sort();
}

needs("docker", "busybox").describe("sandbox pool faults", () => {
  it("replaces a spare removed out of band and removes its network", async () => {
    const pool = dockerPool(run.docker, 2, { spareCheckIntervalMs: 200 });
    onTestFinished(() => pool.stopWarming()); // a failed test must not leave it filling after cleanup
    pool.keepWarm(ownerFor("node-rm"));
    const ready = await eventually(
      async () => {
        const now = await sandboxesOf("node-rm");
        return now.length === 2 && now.every((s) => s.running) && now;
      },
      20_000,
      "two ready sandboxes",
    );
    const gone = ready[0]!.name;
    await run.docker.getContainer(gone).remove({ force: true }); // an operator's `docker rm -f`

    // Nobody takes a sandbox meanwhile: the pool notices by itself.
    await eventually(
      async () => {
        const now = await sandboxesOf("node-rm");
        return now.length === 2 && now.every((s) => s.running) && !now.some((s) => s.name === gone);
      },
      5_000,
      "the pool back to two ready sandboxes",
    );
    await eventually(async () => !(await networksOf("node-rm")).includes(gone), 5_000, "the orphaned network removed");
    await pool.stopWarming();
    expect(await networksOf("node-rm")).toEqual((await sandboxesOf("node-rm")).map((s) => s.name));
  });

  it("leaves a sandbox that another pool is starting to that pool: one path starts it", async () => {
    // The previous agent's pool (or another agent of the node) is between making a
    // sandbox and starting it when this pool adopts what the node left.
    let reachedStart!: (name: string) => void;
    const atStart = new Promise<string>((resolve) => (reachedStart = resolve));
    let letStart!: () => void;
    const gate = new Promise<void>((resolve) => (letStart = resolve));
    onTestFinished(() => letStart());
    const starts: Array<{ name: string; failed?: number }> = [];
    const slow = Object.create(run.docker) as typeof run.docker;
    slow.createContainer = async (options) => {
      const container = await run.docker.createContainer(options);
      const name = String(options.name);
      const start = container.start.bind(container);
      container.start = (async () => {
        if (starts.length === 0) {
          reachedStart(name);
          await gate;
        }
        try {
          await start();
          starts.push({ name });
        } catch (error) {
          starts.push({ name, failed: (error as { statusCode?: number }).statusCode ?? -1 });
          throw error;
        }
      }) as typeof container.start;
      return container;
    };
    const maker = dockerPool(slow, 0);
    const deploying = maker.take(ownerFor("node-two"));
    const made = await atStart;

    const adopter = dockerPool(run.docker, 1);
    onTestFinished(() => adopter.stopWarming());
    adopter.keepWarm(ownerFor("node-two"));
    const own = await adopter.take(ownerFor("node-two")); // settles after its adoption
    await adopter.stopWarming();
    letStart();

    expect(await deploying).toBe(made);
    expect(own).not.toBe(made);
    expect(starts).toEqual([{ name: made }]);
    expect(await sandboxesOf("node-two")).toContainEqual({ name: made, running: true });
  });
});
