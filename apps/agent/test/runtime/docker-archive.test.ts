// A container's files read out as a tar archive, against the real Docker engine:
// running or not, and the engine's refusals in the agent's words.

import { needs } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { DockerRuntime } from "../../src/runtime/docker-runtime";
import { ContainerNotFoundError, PathNotFoundError } from "../../src/runtime/errors";
import { ensureBusyboxImage } from "../support/busybox-image";
import { dockerTestRun } from "../support/docker-test-run";

const run = dockerTestRun();
const runtime = new DockerRuntime({ docker: run.docker });
let containerId = "";

/** The archive's bytes, whole. */
async function archive(path: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of await runtime.archive(containerId, path)) parts.push(chunk as Buffer);
  return Buffer.concat(parts);
}
/** The names of a tar's entries, read from its 512-byte headers (plain ustar: busybox's short names). */
function names(tar: Buffer): string[] {
  const out: string[] = [];
  for (let at = 0; at + 512 <= tar.length; ) {
    const h = tar.subarray(at, at + 512);
    if (h.every((b) => b === 0)) break;
    out.push(h.toString("utf8", 0, h.indexOf(0)));
    const size = Number.parseInt(h.toString("ascii", 124, 136).replace(/\0.*$/s, "").trim() || "0", 8);
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return out;
}

beforeAll(async () => {
  containerId = await runtime.createContainer({
    deploymentId: run.deploymentId("archive"),
    nodeId: "node-test",
    userId: "user-test",
    image: ensureBusyboxImage(),
    env: {},
    cmd: ["sh", "-c", "mkdir -p /w/d && echo kept > /w/d/f && ln -s /w/d /w/link"],
    exposedPorts: [],
    cpuCores: 0,
    memoryMb: 0,
    gpuDeviceIds: [],
    labels: run.labels,
  });
  await runtime.start(containerId);
  await runtime.waitExit(containerId);
});
afterAll(async () => {
  await run.cleanup();
});

needs("docker", "busybox").describe("DockerRuntime archive", () => {
  it("reads an exited container's files as docker cp names them: the path's last name, or . for its contents", async () => {
    expect((await runtime.inspect(containerId)).running).toBe(false);
    expect(names(await archive("/w/d"))).toEqual(["d/", "d/f"]);
    expect(names(await archive("/w/d/."))).toEqual(["./", "./f"]);
    // A link at the end is the link itself, as tar would archive it.
    expect(names(await archive("/w/link"))).toEqual(["link"]);
    expect((await archive("/w/d/f")).toString("utf8", 512, 517)).toBe("kept\n");
  });

  it("says PathNotFoundError for a missing path or one through a file, never naming the host's directories", async () => {
    await expect(runtime.archive(containerId, "/nothing")).rejects.toBeInstanceOf(PathNotFoundError);
    const through = await runtime.archive(containerId, "/w/d/f/x").catch((err: Error) => err);
    expect(through).toBeInstanceOf(PathNotFoundError);
    expect((through as Error).message).toBe("no such file or directory in the container: /w/d/f/x");
  });

  it("says ContainerNotFoundError once the container is removed", async () => {
    await runtime.remove(containerId);
    await expect(runtime.archive(containerId, "/w")).rejects.toBeInstanceOf(ContainerNotFoundError);
  });
});
