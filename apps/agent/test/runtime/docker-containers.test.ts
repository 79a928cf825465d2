// Container lifecycle against the real Docker engine, with a locally built busybox image.

import { needs } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { DockerRuntime } from "../../src/runtime/docker-runtime";
import { ContainerNotFoundError } from "../../src/runtime/errors";
import type { ContainerSpec } from "../../src/runtime/types";
import { ensureBusyboxImage } from "../support/busybox-image";
import { dockerTestRun } from "../support/docker-test-run";
import { eventually } from "../support/eventually";
import { collectLogs } from "../support/log-collector";
import type { Program } from "../support/runtime-contract";
import { runtimeContract } from "../support/runtime-contract";

const run = dockerTestRun();
const runtime = new DockerRuntime({ docker: run.docker });
let image = "";

function specFor(suffix: string, cmd: string[]): ContainerSpec {
  return {
    deploymentId: run.deploymentId(suffix),
    nodeId: "node-test",
    userId: `user-${suffix}`,
    image,
    env: { GREETING: "hello" },
    cmd,
    exposedPorts: [8080],
    cpuCores: 0.5,
    memoryMb: 64,
    gpuDeviceIds: [],
    labels: run.labels,
  };
}

beforeAll(() => {
  image = ensureBusyboxImage();
});
afterAll(async () => {
  await run.cleanup();
});

needs("docker", "busybox").describe("DockerRuntime containers", () => {
  it("applies the hardened options for real", async () => {
    const spec = specFor("hardened", ["sh", "-c", "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; echo $GREETING"]);
    const id = await runtime.createContainer(spec);
    const info = await run.docker.getContainer(id).inspect();
    expect(info.HostConfig).toMatchObject({
      Privileged: false,
      CapDrop: ["ALL"],
      CapAdd: ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETGID", "SETUID", "NET_BIND_SERVICE", "KILL"],
      SecurityOpt: ["no-new-privileges"],
      PidsLimit: 1024,
      Init: true,
      NanoCpus: 500_000_000,
      CpuShares: 512,
      Memory: 64 * 1024 * 1024,
      LogConfig: { Type: "json-file", Config: { "max-size": "10m", "max-file": "3" } },
    });
    expect(info.HostConfig.Binds ?? []).toEqual([]);
    expect(info.Mounts).toEqual([]);
    expect(info.Config.Labels).toMatchObject({
      "cm.managed": "true",
      "cm.deployment-id": spec.deploymentId,
      "cm.node-id": "node-test",
      "cm.user-id": "user-hardened",
    });
    // Its network: a bridge of its own, held by a running sandbox that is never a tenant's container.
    const sandbox = info.Config.Labels["cm.sandbox-name"]!;
    expect(sandbox).toMatch(/^cm-sbx-[0-9a-f]{12}$/);
    const network = await run.docker.getNetwork(sandbox).inspect();
    expect(network.Driver).toBe("bridge");
    expect(network.Labels).toMatchObject({ "cm.sandbox": "true", "cm.node-id": "node-test" });
    const holder = await run.docker.getContainer(sandbox).inspect();
    expect(info.HostConfig.NetworkMode).toBe(`container:${holder.Id}`);
    expect(holder.State.Running).toBe(true);
    expect(holder.Config.Labels).not.toHaveProperty("cm.managed");
    expect(holder.HostConfig).toMatchObject({ CapDrop: ["ALL"], ReadonlyRootfs: true, Privileged: false });

    // And from inside: exactly the 8 capabilities (bits 0,1,3,4,5,6,7,10) and no privilege gain.
    await runtime.start(id);
    expect((await runtime.waitExit(id)).exitCode).toBe(0);
    const lines = await collectLogs(runtime, id, { follow: false });
    expect(lines.map((line) => line.message.replace(/\s+/g, " "))).toEqual(["CapEff: 00000000000004fb", "NoNewPrivs: 1", "hello"]);
  });

  it("caps the cores a tenant asked for, and gives a default's cores as a weight with no quota", async () => {
    const asked = await runtime.createContainer({ ...specFor("cpu-asked", ["true"]), cpuCores: 0.1, cpuLimit: "quota" });
    const byDefault = await runtime.createContainer({ ...specFor("cpu-default", ["true"]), cpuCores: 0.04, cpuLimit: "weight" });
    const limits = async (id: string) => {
      const { HostConfig: h } = await run.docker.getContainer(id).inspect();
      return { NanoCpus: h.NanoCpus, CpuQuota: h.CpuQuota, CpuPeriod: h.CpuPeriod, CpuShares: h.CpuShares };
    };
    expect(await limits(asked)).toEqual({ NanoCpus: 100_000_000, CpuQuota: 0, CpuPeriod: 0, CpuShares: 102 });
    expect(await limits(byDefault)).toEqual({ NanoCpus: 0, CpuQuota: 0, CpuPeriod: 0, CpuShares: 41 });
    // Both run: the end-to-end resource-limits test takes each to running through the real agent.
  });

  it("reports a container that exits with code 3", async () => {
    const id = await runtime.createContainer(specFor("exit3", ["sh", "-c", "exit 3"]));
    await runtime.start(id);
    expect(await runtime.waitExit(id)).toEqual({ id, exitCode: 3, oomKilled: false, error: "" });
    expect(await runtime.inspect(id)).toMatchObject({ running: false, status: "exited", exitCode: 3, ipAddress: null });
  });

  it("stops gracefully, lists by label, and removes container, sandbox and network", async () => {
    const spec = specFor("lifecycle", ["sh", "-c", "while true; do sleep 0.2; done"]);
    const id = await runtime.createContainer(spec);
    expect(await runtime.inspect(id)).toMatchObject({ status: "created", running: false, exitCode: null, startedAt: null });
    await runtime.start(id);
    await runtime.start(id); // already running: not an error
    const running = await runtime.inspect(id);
    expect(running).toMatchObject({ id, deploymentId: spec.deploymentId, running: true, exitCode: null, finishedAt: null });
    expect(running.ipAddress).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    // Exposed on its network only: nothing is published on the host.
    expect(running.ports).toEqual([{ containerPort: 8080 }]);

    const managed = await runtime.listManaged(run.labels);
    expect(managed.map((state) => state.id)).toContain(id);
    expect(managed.every((state) => state.deploymentId.startsWith("test-"))).toBe(true);
    expect(await runtime.listManaged({ ...run.labels, "cm.deployment-id": spec.deploymentId })).toEqual([
      expect.objectContaining({ id, userId: "user-lifecycle" }),
    ]);

    await runtime.stop(id, 5);
    await runtime.stop(id, 5); // already stopped: not an error
    const stopped = await runtime.inspect(id);
    // 143 = SIGTERM: init forwarded it and the shell ended before the kill timeout.
    expect(stopped).toMatchObject({ running: false, status: "exited", exitCode: 143 });
    expect(stopped.finishedAt).not.toBeNull();

    const sandbox = stopped.labels["cm.sandbox-name"]!;
    await runtime.remove(id);
    await expect(runtime.inspect(id)).rejects.toBeInstanceOf(ContainerNotFoundError);
    await expect(run.docker.getContainer(sandbox).inspect()).rejects.toMatchObject({ statusCode: 404 });
    await expect(run.docker.getNetwork(sandbox).inspect()).rejects.toMatchObject({ statusCode: 404 });
    await runtime.remove(id); // already gone: not an error
  });

  it("removes a running container", async () => {
    const spec = specFor("remove-running", ["sleep", "60"]);
    const id = await runtime.createContainer(spec);
    await runtime.start(id);
    await runtime.remove(id);
    expect(await runtime.listManaged({ ...run.labels, "cm.deployment-id": spec.deploymentId })).toEqual([]);
  });

  it("isolates deployments: one cannot reach another, the agent reaches both", async () => {
    const server = await runtime.createContainer(specFor("iso-server", ["httpd", "-f", "-p", "8080", "-h", "/"]));
    await runtime.start(server);
    const address = (await runtime.inspect(server)).ipAddress!;
    expect(address).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    // The host (where the agent runs) reaches the server on its own network...
    await eventually(async () => (await fetch(`http://${address}:8080/`)).status === 404, 20_000, "the server answering the agent");
    // ...a second deployment on the same node does not, while it can reach itself.
    const probe = await runtime.createContainer(
      specFor("iso-client", [
        "sh",
        "-c",
        `httpd -p 8081 -h /; ask() { printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 "$1" "$2" | grep -q HTTP; }; ask 127.0.0.1 8081 && echo self-ok; ask ${address} 8080 && echo reached || echo blocked`,
      ]),
    );
    await runtime.start(probe);
    expect((await runtime.waitExit(probe)).exitCode).toBe(0);
    const lines = (await collectLogs(runtime, probe, { follow: false })).map((line) => line.message);
    expect(lines).toContain("self-ok");
    expect(lines).toContain("blocked");
    expect(lines).not.toContain("reached");
  });

  it("fails clearly for an unknown container", async () => {
    await expect(runtime.start("cm-no-such-container")).rejects.toBeInstanceOf(ContainerNotFoundError);
    await expect(runtime.waitExit("cm-no-such-container")).rejects.toBeInstanceOf(ContainerNotFoundError);
  });
});

needs("docker", "busybox").describe("DockerRuntime keeps the engine contract", () => {
  // Its own label on top of the run's: the other tests' containers are not in its lists.
  const labels = { ...run.labels, "cm.contract": "docker" };
  const script = (program: Program) =>
    [
      ...(program.onSigterm === "ignore" ? ["trap '' TERM"] : []),
      ...(program.stdout ?? []).map((line) => `echo '${line}'`),
      // Apart in time: the engine reads stdout and stderr separately, so only time orders them.
      ...(program.stderr ?? []).map((line) => `sleep 0.1; echo '${line}' >&2`),
      program.exitCode === undefined ? "while true; do sleep 0.2; done" : `exit ${program.exitCode}`,
    ].join("; ");
  runtimeContract(() => ({
    runtime,
    labels,
    missingImage: "cm-test-missing:never",
    spec: (suffix, program) => ({ ...specFor(`contract-${suffix}`, ["sh", "-c", script(program)]), labels }),
    during: (work) => work,
  }));
});
