// Against the real Docker engine of this machine, which has no registry access.

import { needs } from "@cm/testkit";
import { afterEach, beforeAll, expect, it, vi } from "vitest";
import { DockerRuntime } from "../../src/runtime/docker-runtime";
import { ImageUnavailableError } from "../../src/runtime/errors";
import type { PullProgress } from "../../src/runtime/types";
import { BUSYBOX_IMAGE, ensureBusyboxImage } from "../support/busybox-image";
import { dockerTestRun } from "../support/docker-test-run";

const run = dockerTestRun();
const runtime = new DockerRuntime({ docker: run.docker });

beforeAll(() => {
  ensureBusyboxImage();
});
afterEach(() => {
  vi.restoreAllMocks();
});

needs("docker", "busybox").describe("DockerRuntime images", () => {
  it("reports the engine version and data root", async () => {
    expect(await runtime.engineVersion()).toMatch(/^\d+\.\d+/);
    expect(await runtime.engineInfo()).toMatchObject({
      version: expect.stringMatching(/^\d+\.\d+/),
      dataRoot: expect.stringMatching(/^\//),
      runtimes: expect.arrayContaining(["runc"]),
    });
  });

  it("uses a local image without pulling it", async () => {
    const pull = vi.spyOn(run.docker, "pull");
    const progress: PullProgress[] = [];
    expect(await runtime.ensureImage(BUSYBOX_IMAGE, { onProgress: (p) => progress.push(p) })).toEqual({ ref: BUSYBOX_IMAGE, pulled: false });
    expect(pull).not.toHaveBeenCalled();
    expect(progress).toEqual([]);
  });

  it("finds an untagged reference under :latest without pulling", async () => {
    const pull = vi.spyOn(run.docker, "pull");
    expect(await runtime.imagePresent("cm-test-busybox")).toBe(true);
    expect((await runtime.ensureImage("cm-test-busybox")).pulled).toBe(false);
    expect(pull).not.toHaveBeenCalled();
  });

  it("says plainly why a missing image cannot be had", async () => {
    const ref = `cm-test-missing-${Date.now()}:1`;
    expect(await runtime.imagePresent(ref)).toBe(false);
    const error = await runtime.ensureImage(ref).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ImageUnavailableError);
    expect((error as ImageUnavailableError).ref).toBe(ref);
    expect((error as Error).message).toMatch(new RegExp(`^image "${ref}" is not present on this node and could not be pulled: .+`));
    // Docker's own words, not dockerode's "(HTTP code 500)" wrapping.
    expect((error as ImageUnavailableError).reason).not.toMatch(/HTTP code/);
  });
});
