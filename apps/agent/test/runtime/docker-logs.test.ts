// Log streaming against the real Docker engine.

import { needs } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { DockerRuntime } from "../../src/runtime/docker-runtime";
import type { LogLine } from "../../src/runtime/types";
import { ensureBusyboxImage } from "../support/busybox-image";
import { dockerTestRun } from "../support/docker-test-run";
import { collectLogs } from "../support/log-collector";

const run = dockerTestRun();
const runtime = new DockerRuntime({ docker: run.docker });
const LOOP = "i=0; while true; do echo line $i; echo err $i >&2; i=$((i+1)); sleep 0.2; done";
let containerId = "";

function numbered(lines: LogLine[], stream: LogLine["stream"]): number[] {
  return lines.filter((line) => line.stream === stream).map((line) => Number(line.message.split(" ")[1]));
}

beforeAll(async () => {
  containerId = await runtime.createContainer({
    deploymentId: run.deploymentId("logs"),
    nodeId: "node-test",
    userId: "user-test",
    image: ensureBusyboxImage(),
    env: {},
    cmd: ["sh", "-c", LOOP],
    exposedPorts: [],
    cpuCores: 0,
    memoryMb: 0,
    gpuDeviceIds: [],
    labels: run.labels,
  });
  await runtime.start(containerId);
});
afterAll(async () => {
  await run.cleanup();
});

needs("docker", "busybox").describe("DockerRuntime logs", () => {
  it("follows stdout and stderr apart, line by line, with timestamps", async () => {
    const lines: LogLine[] = [];
    let handle: Awaited<ReturnType<typeof runtime.logs>> | undefined;
    await new Promise<void>((resolve, reject) => {
      setTimeout(() => reject(new Error(`only ${lines.length} lines after 20 s`)), 20_000);
      void runtime
        .logs(containerId, { follow: true }, (line) => {
          lines.push(line);
          if (numbered(lines, "stderr").length >= 4 && numbered(lines, "stdout").length >= 4) resolve();
        })
        .then((h) => (handle = h), reject);
    });
    handle?.stop();
    await handle?.done;

    expect(numbered(lines, "stdout").slice(0, 4)).toEqual([0, 1, 2, 3]);
    expect(numbered(lines, "stderr").slice(0, 4)).toEqual([0, 1, 2, 3]);
    expect(lines.filter((line) => line.stream === "stdout").every((line) => /^line \d+$/.test(line.message))).toBe(true);
    expect(lines.filter((line) => line.stream === "stderr").every((line) => /^err \d+$/.test(line.message))).toBe(true);
    for (const line of lines) {
      expect(line.dockerTimestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z$/);
      expect(new Date(line.timestamp).toISOString()).toBe(line.timestamp);
      expect(line.dockerTimestamp.slice(0, 23)).toBe(line.timestamp.slice(0, 23));
    }
  });

  it("returns only lines since the given time", async () => {
    // Under load the loop may not have written "err 3" yet: wait for a few lines past it.
    let all = await collectLogs(runtime, containerId, { follow: false });
    for (let i = 0; i < 100 && numbered(all, "stderr").length < 6; i++) {
      await new Promise((r) => setTimeout(r, 100));
      all = await collectLogs(runtime, containerId, { follow: false });
    }
    const third = all.filter((line) => line.stream === "stdout")[3];
    expect(third?.message).toBe("line 3");
    // Truncated to milliseconds, `since` falls between "line 2" and "line 3" (200 ms apart).
    const since = new Date(third!.timestamp);
    const later = await collectLogs(runtime, containerId, { follow: false, since });
    expect(numbered(later, "stdout")[0]).toBe(3);
    expect(numbered(later, "stderr")[0]).toBeGreaterThanOrEqual(2);
    expect(later.every((line) => line.timestamp >= since.toISOString())).toBe(true);
  });

  it("ends a follow when the container stops", async () => {
    const lines: LogLine[] = [];
    const handle = await runtime.logs(containerId, { follow: true, since: new Date() }, (line) => lines.push(line));
    await runtime.stop(containerId, 5);
    await handle.done;
    expect((await runtime.inspect(containerId)).running).toBe(false);
  });
});
