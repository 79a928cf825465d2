// The pool of network sandboxes, against the real Docker engine.

import { needs } from "@cm/testkit";
import { afterAll, expect, it } from "vitest";
import { DockerRuntime } from "../../src/runtime/docker-runtime";
import { DockerSandboxEngine } from "../../src/runtime/docker-sandbox-engine";
import { silentLogger } from "../../src/runtime/logger";
import { SandboxPool, type SandboxPoolOptions } from "../../src/runtime/sandboxes";
import { ensureBusyboxImage } from "../support/busybox-image";
import { dockerTestRun } from "../support/docker-test-run";
import { eventually } from "../support/eventually";

const run = dockerTestRun();
/** The pool as the agent wires it, on `docker`. */
const dockerPool = (docker: typeof run.docker, poolSize: number, options: SandboxPoolOptions = {}) =>
  new SandboxPool(new DockerSandboxEngine(docker, silentLogger), silentLogger, poolSize, options);
afterAll(async () => {
  await run.cleanup();
});

// Making a sandbox is a network, a container and a start: a second or less on an idle
// engine, far more when every other test file is using the same engine on two cores
// (CI once took over 20 s for two). The waits are for the pool's behaviour, not its speed.
const MAKING_MS = 45_000;

function ownerFor(nodeId: string) {
  return { nodeId, labels: run.labels };
}

async function sandboxesOf(nodeId: string) {
  const listed = await run.docker.listContainers({
    all: true,
    filters: { label: [`cm.sandbox=true`, `cm.node-id=${nodeId}`, `cm.test-run=${run.labels["cm.test-run"]}`] },
  });
  return listed.map((c) => ({ name: c.Names[0]!.slice(1), running: c.State === "running" })).sort((a, b) => a.name.localeCompare(b.name));
}

needs("docker", "busybox").describe("the sandbox pool on Docker", () => {
  it("keeps the pool full, hands out ready sandboxes, and a restarted agent adopts the spares", async () => {
    const pool = dockerPool(run.docker, 2);
    pool.keepWarm(ownerFor("node-pool"));
    const ready = await eventually(
      async () => {
        const now = await sandboxesOf("node-pool");
        return now.length === 2 && now.every((s) => s.running) && now;
      },
      MAKING_MS,
      "two ready sandboxes",
    );
    // Made locally from the pause program: one image, no registry.
    for (const { name } of ready) expect((await run.docker.getContainer(name).inspect()).Config.Image).toMatch(/^cm-sandbox:[0-9a-f]{12}$/);

    const taken = await pool.take(ownerFor("node-pool"));
    expect(ready.map((s) => s.name)).toContain(taken);
    expect(await pool.address(taken)).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    // Refilled after the take, in the background.
    await eventually(async () => (await sandboxesOf("node-pool")).length === 3, MAKING_MS, "the pool refilled");
    await pool.stopWarming();
    // The deployment's container that joined it (never started here: only its label matters).
    await run.docker.createContainer({ Image: ensureBusyboxImage(), Cmd: ["true"], Labels: { ...run.labels, "cm.sandbox-name": taken } });

    // A new agent process: the two unused sandboxes are adopted, not made again; the taken one is not a spare.
    const before = await sandboxesOf("node-pool");
    const restarted = dockerPool(run.docker, 2);
    restarted.keepWarm(ownerFor("node-pool"));
    const spares = before.map((s) => s.name).filter((name) => name !== taken);
    const next = await restarted.take(ownerFor("node-pool"));
    await restarted.stopWarming();
    expect(spares).toContain(next);
    // Nothing of the last agent's was thrown away.
    expect((await sandboxesOf("node-pool")).map((s) => s.name)).toEqual(expect.arrayContaining(before.map((s) => s.name)));
  }, 120_000);

  it("never hands out a stopped sandbox, and removes it", async () => {
    const pool = dockerPool(run.docker, 1);
    pool.keepWarm(ownerFor("node-stale"));
    const [spare] = await eventually(
      async () => {
        const now = await sandboxesOf("node-stale");
        return now.length === 1 && now[0]!.running && now;
      },
      MAKING_MS,
      "a ready sandbox",
    );
    await run.docker.getContainer(spare!.name).stop({ t: 0 }); // e.g. the host rebooted

    const taken = await pool.take(ownerFor("node-stale"));
    await pool.stopWarming();
    expect(taken).not.toBe(spare!.name);
    expect(await pool.address(taken)).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    await eventually(async () => !(await sandboxesOf("node-stale")).some((s) => s.name === spare!.name), 10_000, "the stopped one removed");
  });

  it("makes one on demand for a node it does not keep warm, and removes sandbox and network", async () => {
    const pool = dockerPool(run.docker, 2);
    const name = await pool.take(ownerFor("node-cold"));
    expect(await sandboxesOf("node-cold")).toEqual([{ name, running: true }]);
    expect((await run.docker.getNetwork(name).inspect()).Labels).toMatchObject({ "cm.sandbox": "true", "cm.node-id": "node-cold" });

    await pool.remove(name);
    expect(await sandboxesOf("node-cold")).toEqual([]);
    await expect(run.docker.getNetwork(name).inspect()).rejects.toMatchObject({ statusCode: 404 });
    await pool.remove(name); // already gone: not an error
  });

  it("removes the old node's spares when the agent is enrolled as another node", async () => {
    const pool = dockerPool(run.docker, 1);
    pool.keepWarm(ownerFor("node-before"));
    await eventually(async () => (await sandboxesOf("node-before")).length === 1, MAKING_MS, "a spare for the first node");
    pool.keepWarm(ownerFor("node-after"));
    await eventually(
      async () => (await sandboxesOf("node-before")).length === 0 && (await sandboxesOf("node-after")).length === 1,
      MAKING_MS,
      "spares moved to the new node",
    );
    await pool.stopWarming();
  }, 120_000);

  it("makes the sandbox image again when it was removed meanwhile", async () => {
    // Removing the real image would pull it from under other test files' sandboxes,
    // so Docker's answer for a missing image is played once, as it would come.
    const pruned = Object.create(run.docker) as typeof run.docker;
    let missing = true;
    pruned.createContainer = async (options) => {
      if (missing && String(options.Image).startsWith("cm-sandbox:")) {
        missing = false;
        throw Object.assign(new Error("(HTTP code 404) no such container - No such image: " + options.Image), { statusCode: 404 });
      }
      return run.docker.createContainer(options);
    };
    const pool = dockerPool(pruned, 0);
    const name = await pool.take(ownerFor("node-pruned"));
    expect(missing).toBe(false);
    expect(await sandboxesOf("node-pruned")).toEqual([{ name, running: true }]);
  });

  it("says which machines it supports when the engine is another", async () => {
    const power = Object.create(run.docker) as typeof run.docker;
    power.info = async () => ({ ...(await run.docker.info()), Architecture: "ppc64le" });
    const pool = dockerPool(power, 1);
    await expect(pool.take(ownerFor("node-power"))).rejects.toThrow('this agent runs containers on x86_64 and aarch64 Docker engines; this one is "ppc64le"');
    expect(await sandboxesOf("node-power")).toEqual([]);
  });

  it("removes the sandboxes of tenants' containers killed, stopped or removed out of band: the engine shows the pool's size again", async () => {
    // The agent's own wiring: the pool on the runtime, told of containers' ends by the engine's event stream.
    const runtime = new DockerRuntime({ docker: run.docker, sandboxPool: 2 });
    const owner = ownerFor("node-oob");
    runtime.keepSandboxesWarm(owner);
    await eventually(async () => (await sandboxesOf("node-oob")).filter((s) => s.running).length === 2, MAKING_MS, "two ready sandboxes");
    const tenants: string[] = [];
    for (const suffix of ["killed", "stopped", "removed"]) {
      const id = await runtime.createContainer({
        deploymentId: run.deploymentId(`oob-${suffix}`),
        nodeId: "node-oob",
        userId: "user-oob",
        image: ensureBusyboxImage(),
        env: {},
        cmd: ["sleep", "3600"],
        exposedPorts: [],
        cpuCores: 0,
        memoryMb: 0,
        gpuDeviceIds: [],
        labels: run.labels,
      });
      await runtime.start(id);
      tenants.push(id);
    }
    // Three in use and the pool refilled behind them.
    await eventually(async () => (await sandboxesOf("node-oob")).filter((s) => s.running).length === 5, MAKING_MS, "the pool refilled");

    const [killed, stopped, removed] = tenants as [string, string, string];
    await run.docker.getContainer(killed).kill(); // docker kill
    await run.docker.getContainer(stopped).stop({ t: 1 }); // docker stop
    await run.docker.getContainer(removed).remove({ force: true }); // docker rm -f

    const left = await eventually(
      async () => {
        const now = await sandboxesOf("node-oob");
        return now.length === 2 && now.every((s) => s.running) && now;
      },
      MAKING_MS,
      "the engine to show two sandboxes again",
    );
    await runtime.stopWarming();
    // Their networks went with them: what is left is the two spares'.
    const networks = await run.docker.listNetworks({ filters: { label: [`cm.node-id=node-oob`, `cm.test-run=${run.labels["cm.test-run"]}`] } });
    expect(networks.map((n) => n.Name).sort()).toEqual(left.map((s) => s.name));
  }, 120_000);

  it("cleans up a network whose sandbox was never made", async () => {
    const labels = { ...run.labels, "cm.sandbox": "true", "cm.node-id": "node-debris" };
    await run.docker.createNetwork({ Name: `cm-sbx-debris${run.labels["cm.test-run"]}`, Driver: "bridge", Labels: labels });
    // Made just now: without a zero grace it would be taken for another pool's sandbox being made.
    const pool = dockerPool(run.docker, 1, { makingGraceMs: 0 });
    pool.keepWarm(ownerFor("node-debris"));
    await eventually(async () => (await sandboxesOf("node-debris")).length === 1, MAKING_MS, "a ready sandbox");
    await pool.stopWarming();
    const networks = await run.docker.listNetworks({ filters: { label: [`cm.node-id=node-debris`, `cm.test-run=${run.labels["cm.test-run"]}`] } });
    expect(networks.map((n) => n.Name)).toEqual([(await sandboxesOf("node-debris"))[0]!.name]);
  });
});
