// The pool's bookkeeping under many interleavings: an in-memory engine answers
// each call after a seeded random delay, so a hundred orderings of fills, takes,
// reconnects, adoptions and out-of-band removals run in a few seconds, and a
// failing seed replays exactly. The real engine is in sandboxes*.test.ts.
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../src/runtime/logger";
import { SandboxPool } from "../../src/runtime/sandboxes";
import { MemorySandboxEngine } from "../support/memory-sandbox-engine";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const fakeEngine = (seed: number) => new MemorySandboxEngine({ seed });

const owner = { nodeId: "node-fake", labels: {} };
const SEEDS = 30;
/** fewer: a take here waits out the pool's 1 s refill delay */
const REMOVAL_SEEDS = 10;

describe("sandbox pool interleavings", () => {
  // A guard more than a proof: the orderings that broke this before are rare, and
  // sandbox-pool-faults.test.ts forces one on the real engine.
  it("deploys while the pool fills: no sandbox is removed while its maker is making it, and each is handed out once", async () => {
    for (let seed = 1; seed <= SEEDS; seed++) {
      const engine = fakeEngine(seed);
      const pool = new SandboxPool(engine, silentLogger, 2, { spareCheckIntervalMs: 20 });
      pool.keepWarm(owner);
      const handed = await Promise.all(
        Array.from({ length: 5 }, async () => {
          await sleep(Math.floor(engine.random() * 40));
          if (engine.random() < 0.2) pool.keepWarm({ ...owner }); // a reconnect
          return pool.take(owner);
        }),
      );
      // The next agent of the node starts while this one still fills.
      const next = new SandboxPool(engine, silentLogger, 2);
      next.keepWarm(owner);
      await pool.stopWarming();
      await next.stopWarming();
      expect({ seed, problems: engine.problems }).toEqual({ seed, problems: [] });
      expect({ seed, handedTwice: handed.length - new Set(handed).size }).toEqual({ seed, handedTwice: 0 });
    }
  });

  it("deploys while tenants' containers end out of band: no sandbox is removed before its container is made, and the engine ends at the pool's size", async () => {
    for (let seed = 1; seed <= REMOVAL_SEEDS; seed++) {
      const engine = fakeEngine(seed);
      const pool = new SandboxPool(engine, silentLogger, 2, { spareCheckIntervalMs: 5 });
      pool.keepWarm(owner);
      const lostBeforeJoin: string[] = [];
      await Promise.all(
        Array.from({ length: 5 }, async (_, i) => {
          await sleep(Math.floor(engine.random() * 40));
          const sandbox = await pool.take(owner);
          await sleep(Math.floor(engine.random() * 20)); // the tenant's container being made
          if (engine.containers.get(sandbox)?.state !== "running") lostBeforeJoin.push(sandbox);
          const tenant = `dep-${i}`;
          engine.containers.set(tenant, { name: tenant, labels: { "cm.sandbox-name": sandbox }, createdMs: 0, state: "running" });
          pool.joined(sandbox);
          await sleep(Math.floor(engine.random() * 40));
          if (engine.random() < 0.5)
            engine.containers.get(tenant)!.state = "exited"; // docker kill, docker stop
          else engine.containers.delete(tenant); // docker rm -f
        }),
      );
      const sandboxes = () => [...engine.containers.values()].filter((c) => c.labels["cm.sandbox"] === "true");
      const strays = () => [...engine.networks.keys()].filter((name) => !engine.containers.has(name));
      const deadline = Date.now() + 3_000;
      while ((sandboxes().length !== 2 || strays().length > 0) && Date.now() < deadline) await sleep(10);
      await pool.stopWarming();
      expect({ seed, lostBeforeJoin, sandboxes: sandboxes().length, strays: strays(), problems: engine.problems }).toEqual({
        seed,
        lostBeforeJoin: [],
        sandboxes: 2,
        strays: [],
        problems: [],
      });
    }
  });

  it("a spare removed out of band: the pool notices, removes its network and refills", async () => {
    for (let seed = 1; seed <= REMOVAL_SEEDS; seed++) {
      const engine = fakeEngine(seed);
      const pool = new SandboxPool(engine, silentLogger, 2, { spareCheckIntervalMs: 20 });
      pool.keepWarm(owner);
      const full = () => engine.containers.size === 2 && [...engine.containers.values()].every((c) => c.state === "running");
      while (!full()) await sleep(5);
      const gone = [...engine.containers.keys()][Math.floor(engine.random() * 2)]!;
      engine.containers.delete(gone); // `docker rm -f`: the network stays
      const took = engine.random() < 0.5;
      if (took) void pool.take(owner);
      const running = () => [...engine.containers.values()].filter((c) => c.state === "running").length;
      const deadline = Date.now() + 2_000;
      while ((engine.networks.has(gone) || running() < (took ? 3 : 2)) && Date.now() < deadline) await sleep(10);
      await pool.stopWarming();
      expect({ seed, orphanNetwork: engine.networks.has(gone), running: running(), problems: engine.problems }).toEqual({
        seed,
        orphanNetwork: false,
        running: took ? 3 : 2,
        problems: [],
      });
      expect({ seed, networksWithoutSandbox: [...engine.networks.keys()].filter((name) => !engine.containers.has(name)) }).toEqual({
        seed,
        networksWithoutSandbox: [],
      });
    }
  });
});
