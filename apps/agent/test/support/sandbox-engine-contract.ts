// What the network sandbox pool relies on from its engine, written once and run
// against both: DockerSandboxEngine on real Docker (docker-sandbox-engine.test.ts)
// and the in-memory one the pool's tests use (memory-sandbox-engine.test.ts).
// The in-memory engine is trusted only as far as this contract goes.
import { randomBytes } from "node:crypto";
import { expect, it, onTestFinished } from "vitest";
import { bridgeName } from "../../src/runtime/create-options";
import type { SandboxEngine } from "../../src/runtime/sandbox-engine";

export interface SandboxContractEngine {
  engine: SandboxEngine;
  /** labels that select only this suite's sandboxes (and go on every one it makes) */
  labels: Record<string, string>;
  /** A container joins `sandbox`, made and not started, as a tenant's container is before its start. */
  join(sandbox: string): Promise<void>;
  /** What an operator does behind the agent's back: `docker stop`, `docker rm -f`. */
  stopOutOfBand(name: string): Promise<void>;
  removeOutOfBand(name: string): Promise<void>;
}

const newName = () => `cm-sbx-${randomBytes(6).toString("hex")}`;

/** Makes a sandbox that goes when the test does, passed or failed. */
async function make(engine: SandboxEngine, labels: Record<string, string>, bridgePrefix?: string): Promise<string> {
  const name = newName();
  onTestFinished(async () => {
    await engine.removeContainer(name).catch(() => {});
    await engine.removeNetwork(name).catch(() => {});
  });
  await engine.prepare();
  await engine.create({ name, labels, bridgePrefix });
  return name;
}

export function sandboxEngineContract(setup: () => SandboxContractEngine): void {
  it("makes a running sandbox with an address, and its network with the bridge the egress policy expects, both labelled", async () => {
    const { engine, labels } = setup();
    const name = await make(engine, { ...labels, "cm.contract": "made" }, "cmt-");
    expect(await engine.running(name)).toBe(true);
    expect(await engine.address(name)).toMatch(/^\d+\.\d+\.\d+\.\d+$/);

    const [holder, ...others] = await engine.listSandboxes({ ...labels, "cm.contract": "made" });
    expect(others).toEqual([]);
    expect(holder).toMatchObject({ name, state: "running", labels: { ...labels, "cm.contract": "made", "cm.sandbox": "true" } });
    expect(Math.abs(holder!.createdMs - Date.now())).toBeLessThan(60_000);
    const [network, ...otherNetworks] = await engine.listNetworks({ ...labels, "cm.contract": "made" });
    expect(otherNetworks).toEqual([]);
    expect(network).toMatchObject({ name, bridge: bridgeName(name, "cmt-"), labels: { ...labels, "cm.contract": "made", "cm.sandbox": "true" } });
    expect(Math.abs(network!.createdMs - Date.now())).toBeLessThan(60_000);
  });

  it("lists only the sandboxes and networks carrying every label asked for", async () => {
    const { engine, labels } = setup();
    const a = await make(engine, { ...labels, "cm.contract": "pick-a" });
    const b = await make(engine, { ...labels, "cm.contract": "pick-b" });
    expect((await engine.listSandboxes(labels)).map((s) => s.name)).toEqual(expect.arrayContaining([a, b]));
    expect((await engine.listSandboxes({ ...labels, "cm.contract": "pick-b" })).map((s) => s.name)).toEqual([b]);
    expect((await engine.listNetworks({ ...labels, "cm.contract": "pick-a" })).map((n) => n.name)).toEqual([a]);
    expect(await engine.listSandboxes({ ...labels, "cm.contract": "none" })).toEqual([]);
  });

  it("lists the containers that joined a sandbox, with their state", async () => {
    const { engine, labels, join } = setup();
    const name = await make(engine, labels);
    expect((await engine.listUsers()).filter((user) => user.sandbox === name)).toEqual([]);
    await join(name);
    expect((await engine.listUsers()).filter((user) => user.sandbox === name)).toEqual([{ sandbox: name, state: "created" }]);
  });

  it("refuses to remove the network of a sandbox that holds it; removed, both are gone, and removing again is not an error", async () => {
    const { engine, labels } = setup();
    const name = await make(engine, labels);
    await expect(engine.removeNetwork(name)).rejects.toThrow();
    expect((await engine.listNetworks(labels)).map((n) => n.name)).toContain(name);

    await engine.removeContainer(name);
    await engine.removeNetwork(name);
    expect(await engine.running(name)).toBe(false);
    expect(await engine.address(name)).toBeNull();
    expect((await engine.listSandboxes(labels)).map((s) => s.name)).not.toContain(name);
    expect((await engine.listNetworks(labels)).map((n) => n.name)).not.toContain(name);
    await engine.removeContainer(name);
    await engine.removeNetwork(name);
  });

  it("a sandbox stopped out of band is listed exited and has no address; one removed out of band leaves its network", async () => {
    const { engine, labels, stopOutOfBand, removeOutOfBand } = setup();
    const stopped = await make(engine, { ...labels, "cm.contract": "stopped" });
    const removed = await make(engine, { ...labels, "cm.contract": "removed" });
    await stopOutOfBand(stopped);
    await removeOutOfBand(removed);

    expect(await engine.running(stopped)).toBe(false);
    expect(await engine.address(stopped)).toBeNull();
    expect(await engine.listSandboxes({ ...labels, "cm.contract": "stopped" })).toMatchObject([{ name: stopped, state: "exited" }]);
    expect(await engine.running(removed)).toBe(false);
    expect(await engine.listSandboxes({ ...labels, "cm.contract": "removed" })).toEqual([]);
    expect((await engine.listNetworks({ ...labels, "cm.contract": "removed" })).map((n) => n.name)).toEqual([removed]);
    await engine.removeContainer(removed); // already gone: not an error
    await engine.removeNetwork(removed);
    expect(await engine.listNetworks({ ...labels, "cm.contract": "removed" })).toEqual([]);
  });
}
