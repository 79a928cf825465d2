// The network sandbox pool's promises to the operator, on an in-memory engine
// and fake timers (the pool keeps its own unref'd timers and reads Date.now):
// how many sandboxes wait ready, when they are refilled, what happens to those an
// operator removed or a reboot stopped, and what a restarted or re-enrolled agent
// does with what the last one left. Real Docker: sandboxes.test.ts.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { ContainerEnd, ContainerEnds } from "../../src/runtime/docker-engine-events";
import { silentLogger } from "../../src/runtime/logger";
import type { SandboxOwner, SandboxPoolOptions } from "../../src/runtime/sandboxes";
import { DEFAULT_MAKING_GRACE_MS, DEFAULT_SPARE_CHECK_INTERVAL_MS, SandboxPool } from "../../src/runtime/sandboxes";
import { MemorySandboxEngine } from "../support/memory-sandbox-engine";

const AGENT_LABELS = { "cm.test": "pool" };
const owner = (nodeId = "node_a", installId = "ins_1"): SandboxOwner => ({ nodeId, labels: AGENT_LABELS, installId });
const pools: SandboxPool[] = [];

beforeEach(() => {
  vi.useFakeTimers({ now: Date.UTC(2026, 0, 1) });
});
afterEach(async () => {
  for (const pool of pools.splice(0)) await pool.stopWarming();
  vi.useRealTimers();
});

function setup(engine = new MemorySandboxEngine(), poolSize = 2, options: SandboxPoolOptions = {}) {
  const pool = new SandboxPool(engine, silentLogger, poolSize, options);
  pools.push(pool);
  const sandboxes = () => [...engine.containers.values()].filter((c) => c.labels["cm.sandbox"] === "true");
  return {
    engine,
    pool,
    sandboxes,
    running: () =>
      sandboxes()
        .filter((c) => c.state === "running")
        .map((c) => c.name)
        .sort(),
    /** networks without their sandbox container: what a broken cleanup leaves on the operator's host */
    strayNetworks: () => [...engine.networks.keys()].filter((name) => !engine.containers.has(name)),
  };
}

const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);

/** What DockerEngineEvents tells, told by hand. */
function engineEvents() {
  const ends = new Set<(end: ContainerEnd) => void>();
  const events: ContainerEnds = {
    onContainerEnd: (listener) => {
      ends.add(listener);
      return () => ends.delete(listener);
    },
    onEngineBack: () => () => {},
  };
  const ended = (end: ContainerEnd) => {
    for (const listener of ends) listener(end);
  };
  return { events, ended, listening: () => ends.size };
}

/** A tenant's container in the sandbox's namespace, as DockerContainerClient makes it (the pool is told once it exists). */
function tenantIn(engine: MemorySandboxEngine, pool: SandboxPool, sandbox: string, name = `dep-${sandbox}`) {
  engine.containers.set(name, {
    name,
    labels: { ...AGENT_LABELS, "cm.managed": "true", "cm.sandbox-name": sandbox },
    createdMs: Date.now(),
    state: "running",
  });
  pool.joined(sandbox);
  return name;
}

describe("sandbox pool", () => {
  it("keeps the pool full of running sandboxes, each on a bridge network of its own, labelled for its node and install", async () => {
    const { pool, engine, running, sandboxes } = setup();
    pool.keepWarm(owner());
    await advance(0);

    expect(running()).toHaveLength(2);
    expect([...engine.networks.keys()].sort()).toEqual(running());
    for (const sandbox of sandboxes()) {
      expect(sandbox.labels).toMatchObject({ ...AGENT_LABELS, "cm.sandbox": "true", "cm.node-id": "node_a", "cm.install-id": "ins_1" });
      expect(engine.networks.get(sandbox.name)!.labels).toMatchObject({ "cm.sandbox": "true", "cm.node-id": "node_a" });
    }
    expect(engine.imagesMade).toBe(1); // which image: sandboxes.test.ts, on Docker
    expect(engine.problems).toEqual([]);
  });

  it("hands out a ready sandbox at once and makes its replacement a second later, off the deploy path", async () => {
    const { pool, running } = setup();
    pool.keepWarm(owner());
    await advance(0);
    const ready = running();

    const taken = await pool.take(owner());
    expect(ready).toContain(taken);
    expect(running()).toEqual(ready); // nothing was made while the deployment waited
    await advance(999);
    expect(running()).toHaveLength(2);
    await advance(1);
    expect(running()).toHaveLength(3); // the taken one, and two spares again
    expect(await pool.address(taken)).toBe("10.0.0.2");
  });

  it("notices within its check interval a spare an operator removed, removes the network it left and makes a new spare", async () => {
    const { pool, engine, running, strayNetworks } = setup();
    pool.keepWarm(owner());
    await advance(0);
    const [gone, kept] = running();
    engine.containers.delete(gone!); // `docker rm -f`: the network stays behind

    await advance(DEFAULT_SPARE_CHECK_INTERVAL_MS - 1);
    expect(strayNetworks()).toEqual([gone]);
    await advance(1);
    await advance(1); // the fill the check starts at once (fake timers put a 0 ms timer set during a tick 1 ms on)
    expect(strayNetworks()).toEqual([]);
    expect(running()).toHaveLength(2);
    expect(running()).toContain(kept);
    expect(running()).not.toContain(gone);
  });

  it("converges to its size when tenants' containers are killed, stopped or removed out of band: their sandboxes and networks go at its next look", async () => {
    const { pool, engine, running, sandboxes, strayNetworks } = setup();
    pool.keepWarm(owner());
    await advance(0);
    const taken: string[] = [];
    for (let i = 0; i < 4; i++) taken.push(await pool.take(owner()));
    const [killed, stopped, removed, kept] = taken.map((sandbox) => tenantIn(engine, pool, sandbox)) as [string, string, string, string];
    const joining = await pool.take(owner()); // handed out, its container not made yet
    await advance(1_000); // refilled behind them
    expect(running()).toHaveLength(7);

    engine.containers.get(killed)!.state = "exited"; // docker kill
    engine.containers.get(stopped)!.state = "exited"; // docker stop
    engine.containers.delete(removed); // docker rm -f
    await advance(DEFAULT_SPARE_CHECK_INTERVAL_MS);

    // The two spares, the one still in use and the one being joined: nothing of the three others.
    expect(sandboxes()).toHaveLength(4);
    expect(running()).toEqual(expect.arrayContaining([taken[3]!, joining]));
    for (const gone of taken.slice(0, 3)) {
      expect(engine.containers.has(gone)).toBe(false);
      expect(engine.networks.has(gone)).toBe(false);
    }
    expect(strayNetworks()).toEqual([]);
    expect(engine.containers.get(kept)!.state).toBe("running"); // tenants' containers are the reconciler's, never touched here
    expect(engine.containers.get(killed)!.state).toBe("exited");
    expect(engine.problems).toEqual([]);

    // Its container gone too: the pool's two, and the one still being joined.
    engine.containers.delete(kept);
    await advance(DEFAULT_SPARE_CHECK_INTERVAL_MS);
    expect(running()).toHaveLength(3);
    expect(running()).toContain(joining);
  });

  it("a restarted agent frees at once the sandbox of a container that ended while no agent ran", async () => {
    const engine = new MemorySandboxEngine();
    const before = setup(engine);
    before.pool.keepWarm(owner());
    await advance(0);
    const sandbox = await before.pool.take(owner());
    const tenant = tenantIn(engine, before.pool, sandbox);
    await advance(1_000);
    await before.pool.stopWarming();
    engine.containers.get(tenant)!.state = "exited"; // killed while the agent was away: no event will come

    const after = setup(engine);
    after.pool.keepWarm(owner());
    await advance(0);
    expect(engine.containers.has(sandbox)).toBe(false);
    expect(after.running()).toHaveLength(2);
    expect(after.strayNetworks()).toEqual([]);
  });

  it("with no spares to keep (AGENT_SANDBOX_POOL=0), still removes the sandbox of a container removed out of band", async () => {
    const { pool, engine, sandboxes, strayNetworks } = setup(new MemorySandboxEngine(), 0);
    pool.keepWarm(owner());
    const sandbox = await pool.take(owner());
    engine.containers.delete(tenantIn(engine, pool, sandbox));
    await advance(DEFAULT_SPARE_CHECK_INTERVAL_MS);
    expect(sandboxes()).toEqual([]);
    expect(strayNetworks()).toEqual([]);
  });

  it("looks at once when the engine says a tenant's container ended, without waiting for its interval", async () => {
    const { events, ended, listening } = engineEvents();
    const { pool, engine, running } = setup(new MemorySandboxEngine(), 2, { events });
    pool.keepWarm(owner());
    await advance(0);
    const sandbox = await pool.take(owner());
    const tenant = tenantIn(engine, pool, sandbox);
    await advance(1_000);
    expect(running()).toHaveLength(3);

    engine.containers.delete(tenant);
    ended({ id: tenant, action: "destroy", labels: engine.containers.get(tenant)?.labels ?? { "cm.sandbox-name": sandbox } });
    await advance(0);
    expect(running()).toHaveLength(2);
    expect(engine.networks.has(sandbox)).toBe(false);
    await pool.stopWarming();
    expect(listening()).toBe(0);
  });

  it("never hands out a sandbox that stopped (a reboot): removes it with its network and makes one", async () => {
    const { pool, engine, running, strayNetworks } = setup();
    pool.keepWarm(owner());
    await advance(0);
    const stopped = running();
    for (const name of stopped) engine.containers.get(name)!.state = "exited";

    const taken = await pool.take(owner());
    expect(stopped).not.toContain(taken);
    expect(engine.containers.get(taken)?.state).toBe("running");
    await advance(0);
    for (const name of stopped) expect(engine.containers.has(name)).toBe(false);
    expect(strayNetworks()).toEqual([]);
  });

  it("a restarted agent takes over the spares the last one left, and cleans up what it left broken", async () => {
    const engine = new MemorySandboxEngine();
    const before = setup(engine, 3);
    before.pool.keepWarm(owner());
    await advance(0);
    await before.pool.stopWarming(); // the agent stops; ready spares stay for the next one
    const [stopped, ...ready] = before.running();
    engine.containers.get(stopped!)!.state = "exited";
    // Networks whose sandbox was never made: one the dead agent left long ago, one another pool is making right now.
    engine.networks.set("cm-sbx-dead", {
      labels: { ...AGENT_LABELS, "cm.sandbox": "true", "cm.node-id": "node_a" },
      createdMs: Date.now() - DEFAULT_MAKING_GRACE_MS - 1,
    });
    engine.networks.set("cm-sbx-young", {
      labels: { ...AGENT_LABELS, "cm.sandbox": "true", "cm.node-id": "node_a" },
      createdMs: Date.now() - 1_000,
    });

    const after = setup(engine, 2);
    after.pool.keepWarm(owner());
    await advance(0);
    expect(after.running()).toEqual(ready); // adopted: none made
    expect(engine.containers.has(stopped!)).toBe(false);
    expect([...engine.networks.keys()].sort()).toEqual([...ready, "cm-sbx-young"].sort());
    expect(ready).toContain(await after.pool.take(owner()));
  });

  it("re-enrolled as another node, removes the old node's spares, in this agent or the next one of the same install", async () => {
    const engine = new MemorySandboxEngine();
    const { pool, running } = setup(engine);
    pool.keepWarm(owner("node_a"));
    await advance(0);
    const nodeA = running();
    pool.keepWarm(owner("node_b"));
    await advance(0);
    expect(running()).toHaveLength(2);
    expect(running().some((name) => nodeA.includes(name))).toBe(false);
    await pool.stopWarming();
    const nodeB = running();

    // The machine is enrolled again while no agent runs; the next agent of this install finds node_b's spares.
    const next = setup(engine);
    next.pool.keepWarm(owner("node_c"));
    await advance(0);
    expect(running()).toHaveLength(2);
    expect(running().some((name) => nodeB.includes(name))).toBe(false);
    expect(next.strayNetworks()).toEqual([]);
    // Another agent's install on the same engine is left alone.
    const neighbour = setup(engine);
    neighbour.pool.keepWarm({ nodeId: "node_n", labels: AGENT_LABELS, installId: "ins_2" });
    await advance(0);
    expect(running()).toHaveLength(4);
  });

  it("after stopWarming, makes no more sandboxes, and a deployment still gets one", async () => {
    const { pool, running } = setup();
    pool.keepWarm(owner());
    await advance(0);
    await pool.stopWarming();
    for (let i = 0; i < 3; i++) await pool.take(owner());
    await advance(5 * 60_000);
    expect(running()).toHaveLength(3); // two spares handed out, one made for the third deployment
  });

  it("makes its image again, once, when an operator pruned it", async () => {
    const { pool, engine, running } = setup(new MemorySandboxEngine(), 0);
    await pool.take(owner());
    engine.imagePresent = false; // `docker image prune -a`
    const taken = await pool.take(owner());
    expect(engine.containers.get(taken)?.state).toBe("running");
    expect(running()).toHaveLength(2);
    expect(engine.imagesMade).toBe(2);
  });
});
