// What the agent relies on from a container engine, written once and run against
// both engines: DockerRuntime on real Docker (docker-containers.test.ts) and the
// in-memory double (memory-runtime.test.ts). When Docker's behaviour and the
// double's part, the double's suite still passes and Docker's fails: the double
// is only trusted as far as this contract goes.
import { expect, it, onTestFinished } from "vitest";
import { dockerTsToNs } from "../../src/logs/docker-ts";
import type { ContainerRuntime } from "../../src/runtime/container-runtime";
import { ContainerNotFoundError } from "../../src/runtime/errors";
import type { ContainerSpec } from "../../src/runtime/types";
import { collectLogs } from "./log-collector";

/** A program for the tenant's container, which each engine makes real its own way. */
export interface Program {
  stdout?: string[];
  stderr?: string[];
  /** after printing: run until stopped, or end with this code */
  exitCode?: number;
  /** "ignore": SIGTERM does nothing, the stop's timeout ends it */
  onSigterm?: "ignore";
}

export interface ContractEngine {
  runtime: ContainerRuntime;
  /** labels that select only this suite's containers */
  labels: Record<string, string>;
  /** a container spec running `program`, unique to `suffix` */
  spec(suffix: string, program: Program): ContainerSpec;
  /** an image the engine does not have */
  missingImage: string;
  /** Lets the engine's time pass until `work` settles (real time, or a fake clock moved on). */
  during<T>(work: Promise<T>): Promise<T>;
}

/** Creates a container that goes when the test does, passed or failed: a failed case must not leave containers in the next one's lists. */
async function create(runtime: ContainerRuntime, spec: ContainerSpec): Promise<string> {
  const id = await runtime.createContainer(spec);
  onTestFinished(() => runtime.remove(id).catch(() => {}));
  return id;
}

export function runtimeContract(engine: () => ContractEngine): void {
  it("creates a container stopped and labelled, and starts it running", async () => {
    const { runtime, spec, labels } = engine();
    const fresh = spec("create", {});
    const name = `cm-contract-${fresh.deploymentId}`;
    const id = await create(runtime, { ...fresh, name });
    const created = await runtime.inspect(id);
    expect(created).toMatchObject({ running: false, status: "created", exitCode: null, startedAt: null, finishedAt: null });
    expect(created.labels).toMatchObject({ ...labels, "cm.managed": "true" });
    expect(created.name).toBe(name);

    await runtime.start(id);
    await runtime.start(id); // already running: not an error
    const running = await runtime.inspect(id);
    expect(running).toMatchObject({ id, running: true, status: "running", exitCode: null, finishedAt: null });
    expect(Date.parse(running.startedAt!)).not.toBeNaN();
    expect(running.ipAddress).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
  });

  it("refuses a name in use and an image it does not have", async () => {
    const { runtime, spec, missingImage } = engine();
    const first = spec("twice", {});
    const name = `cm-contract-${first.deploymentId}`;
    await create(runtime, { ...first, name });
    await expect(runtime.createContainer({ ...spec("twice-again", {}), name })).rejects.toMatchObject({ statusCode: 409 });
    await expect(runtime.createContainer({ ...spec("no-image", {}), image: missingImage })).rejects.toMatchObject({ statusCode: 404 });
  });

  it("tells the exit code of a program that ends by itself, to a wait and to inspect", async () => {
    const { runtime, spec, during } = engine();
    const id = await create(runtime, spec("exit3", { exitCode: 3 }));
    await runtime.start(id);
    expect(await during(runtime.waitExit(id))).toEqual({ id, exitCode: 3, oomKilled: false, error: "" });
    expect(await runtime.inspect(id)).toMatchObject({ running: false, status: "exited", exitCode: 3 });
    expect((await runtime.inspect(id)).finishedAt).not.toBeNull();
    expect(await runtime.waitExit(id)).toMatchObject({ exitCode: 3 }); // not running: at once
  });

  it("stops with SIGTERM (exit 143), or kills a program that ignores it once the timeout passed (exit 137)", async () => {
    const { runtime, spec, during } = engine();
    const polite = await create(runtime, spec("term", {}));
    // It says when its trap is set: a SIGTERM before that would end it (exit 143) on a busy machine.
    const stubborn = await create(runtime, spec("kill", { onSigterm: "ignore", stdout: ["trapped"] }));
    await runtime.start(polite);
    await runtime.start(stubborn);
    for (let i = 0; i < 200 && !(await collectLogs(runtime, stubborn, { follow: false })).some((l) => l.message === "trapped"); i++) {
      await during(new Promise((resolve) => setTimeout(resolve, 50)));
    }
    await during(Promise.all([runtime.stop(polite, 5), runtime.stop(stubborn, 1)]));
    expect(await runtime.inspect(polite)).toMatchObject({ running: false, exitCode: 143 });
    expect(await runtime.inspect(stubborn)).toMatchObject({ running: false, exitCode: 137 });
    await runtime.stop(polite, 5); // already stopped: not an error
  });

  it("removes a running container; gone, it is not found, and removing it again is not an error", async () => {
    const { runtime, spec } = engine();
    const id = await create(runtime, spec("rm", {}));
    await runtime.start(id);
    await runtime.remove(id);
    await runtime.remove(id);
    await expect(runtime.inspect(id)).rejects.toBeInstanceOf(ContainerNotFoundError);
    await expect(runtime.waitExit(id)).rejects.toBeInstanceOf(ContainerNotFoundError);
    await expect(runtime.stop(id, 1)).rejects.toBeInstanceOf(ContainerNotFoundError);
    await expect(runtime.logs(id, { follow: false }, () => {})).rejects.toBeInstanceOf(ContainerNotFoundError);
  });

  it("lists only managed containers carrying the labels asked for", async () => {
    const { runtime, spec, labels } = engine();
    const a = await create(runtime, spec("list-a", {}));
    const b = await create(runtime, { ...spec("list-b", {}), labels: { ...labels, "cm.contract-pick": "b" } });
    expect((await runtime.listManaged(labels)).map((c) => c.id).sort()).toEqual([a, b].sort());
    expect((await runtime.listManaged({ ...labels, "cm.contract-pick": "b" })).map((c) => c.id)).toEqual([b]);
  });

  it("gives the log line by line, streams apart, in order, stamped to the nanosecond; tail reads the last lines", async () => {
    const { runtime, spec, during } = engine();
    const id = await create(runtime, spec("logs", { stdout: ["one", "two"], stderr: ["three"], exitCode: 0 }));
    await runtime.start(id);
    await during(runtime.waitExit(id));
    const lines = await collectLogs(runtime, id, { follow: false });
    expect(lines.map((l) => `${l.stream} ${l.message}`)).toEqual(["stdout one", "stdout two", "stderr three"]);
    // Lines read in one go may share a stamp; they never go back in time.
    const ns = lines.map((l) => dockerTsToNs(l.dockerTimestamp));
    expect(ns.every((n, i) => n !== undefined && (i === 0 || n >= ns[i - 1]!))).toBe(true);
    expect(lines.every((l) => l.timestamp === new Date(l.timestamp).toISOString())).toBe(true);
    expect((await collectLogs(runtime, id, { follow: false, tail: 1 })).map((l) => l.message)).toEqual(["three"]);
  });
}
