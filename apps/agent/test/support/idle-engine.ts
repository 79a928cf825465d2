// A container engine with no containers, for tests of what never reaches one
// (the agent's connection, hello, heartbeats, close codes): they must pass on a
// machine without Docker. Asked to run anything, it says so loudly.
import type { ContainerRuntime } from "../../src/runtime/container-runtime";
import { ContainerNotFoundError, ImageUnavailableError } from "../../src/runtime/errors";
import type { EngineInfo } from "../../src/runtime/types";

const INFO: EngineInfo = { version: "0.0.0-idle", dataRoot: "/nonexistent", runtimes: ["runc"], architecture: "x86_64" };
const refuse = (what: string) => Promise.reject(new Error(`the idle test engine runs no containers (asked to ${what})`));

export function idleEngine(): ContainerRuntime {
  return {
    engineVersion: async () => INFO.version,
    engineInfo: async () => INFO,
    imagePresent: async () => false,
    ensureImage: async (ref) => Promise.reject(new ImageUnavailableError(ref, "the idle test engine has no images")),
    keepSandboxesWarm: () => undefined,
    stopWarming: async () => undefined,
    createContainer: () => refuse("create a container"),
    start: () => refuse("start a container"),
    stop: async () => undefined,
    remove: async () => undefined,
    inspect: async (id) => Promise.reject(new ContainerNotFoundError(id)),
    listManaged: async () => [],
    waitExit: () => refuse("wait for a container"),
    logs: () => refuse("read a container's logs"),
  };
}
