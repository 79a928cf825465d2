// The pool's bookkeeping under many interleavings: an in-memory engine answers
// each call after a seeded random delay, so a hundred orderings of fills, takes,
// reconnects, adoptions and out-of-band removals run in a few seconds, and a
// failing seed replays exactly. The real engine is in sandboxes*.test.ts.
import type Docker from "dockerode";
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../src/runtime/logger";
import { DockerSandboxes } from "../../src/runtime/sandboxes";

interface FakeContainer {
  name: string;
  labels: Record<string, string>;
  createdS: number;
  state: "created" | "running";
  starts: number;
}

const notFound = () => Object.assign(new Error("(HTTP code 404) no such container"), { statusCode: 404 });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The slice of dockerode the pool uses; `problems` collects what must never happen. */
function fakeEngine(seed: number) {
  let state = seed;
  const random = () => {
    // mulberry32
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const delay = () => sleep(Math.floor(random() * 8));
  const containers = new Map<string, FakeContainer>();
  const networks = new Map<string, { labels: Record<string, string>; created: string }>();
  const problems: string[] = [];
  const matches = (labels: Record<string, string>, filters: string[]) =>
    filters.every((filter) => {
      const [key, value] = filter.split("=") as [string, string | undefined];
      return value === undefined ? key in labels : labels[key] === value;
    });
  const docker = {
    info: async () => ({ Architecture: "x86_64" }),
    getImage: () => ({ inspect: async () => ({}) }),
    createNetwork: async (options: { Name: string; Labels: Record<string, string> }) => {
      await delay();
      networks.set(options.Name, { labels: options.Labels, created: new Date().toISOString() });
    },
    createContainer: async (options: { name: string; Labels: Record<string, string> }) => {
      await delay();
      const container: FakeContainer = { name: options.name, labels: options.Labels, createdS: Math.floor(Date.now() / 1000), state: "created", starts: 0 };
      containers.set(options.name, container);
      return {
        start: async () => {
          await delay();
          if (containers.get(options.name) !== container) throw notFound();
          container.starts += 1;
          if (container.starts > 1) problems.push(`${container.name} started twice`);
          container.state = "running";
        },
      };
    },
    getContainer: (name: string) => ({
      inspect: async () => {
        await delay();
        const container = containers.get(name);
        if (!container) throw notFound();
        return { State: { Running: container.state === "running" }, NetworkSettings: { Networks: { [name]: { IPAddress: "10.0.0.2" } } } };
      },
      remove: async () => {
        await delay();
        const container = containers.get(name);
        if (!container) throw notFound();
        if (container.state === "created") problems.push(`${name} removed while its maker was starting it`);
        containers.delete(name);
      },
      wait: async () => {},
    }),
    getNetwork: (name: string) => ({
      remove: async () => {
        await delay();
        if (!networks.delete(name)) throw notFound();
      },
    }),
    listContainers: async (options: { filters: { label: string[] } }) => {
      await delay();
      return [...containers.values()].filter((c) => matches(c.labels, options.filters.label)).map((c) => ({ Names: [`/${c.name}`], Labels: c.labels, State: c.state, Created: c.createdS }));
    },
    listNetworks: async (options: { filters: { label: string[] } }) => {
      await delay();
      return [...networks].filter(([, n]) => matches(n.labels, options.filters.label)).map(([Name, n]) => ({ Name, Labels: n.labels, Created: n.created }));
    },
  };
  return { docker: docker as unknown as Docker, containers, networks, problems, random };
}

const owner = { nodeId: "node-fake", labels: {} };
const SEEDS = 30;
/** fewer: a take here waits out the pool's 1 s refill delay */
const REMOVAL_SEEDS = 10;

describe("sandbox pool interleavings", () => {
  // A guard more than a proof: the orderings that broke this before are rare, and
  // sandbox-pool-faults.test.ts forces one on the real engine.
  it("deploys while the pool fills: every sandbox started once, by its maker, and handed out once", async () => {
    for (let seed = 1; seed <= SEEDS; seed++) {
      const engine = fakeEngine(seed);
      const pool = new DockerSandboxes(engine.docker, silentLogger, 2, { spareCheckIntervalMs: 20 });
      pool.keepWarm(owner);
      const handed = await Promise.all(
        Array.from({ length: 5 }, async () => {
          await sleep(Math.floor(engine.random() * 40));
          if (engine.random() < 0.2) pool.keepWarm({ ...owner }); // a reconnect
          return pool.take(owner);
        }),
      );
      // The next agent of the node starts while this one still fills.
      const next = new DockerSandboxes(engine.docker, silentLogger, 2);
      next.keepWarm(owner);
      await pool.stopWarming();
      await next.stopWarming();
      expect({ seed, problems: engine.problems }).toEqual({ seed, problems: [] });
      expect({ seed, handedTwice: handed.length - new Set(handed).size }).toEqual({ seed, handedTwice: 0 });
    }
  });

  it("a spare removed out of band: the pool notices, removes its network and refills", async () => {
    for (let seed = 1; seed <= REMOVAL_SEEDS; seed++) {
      const engine = fakeEngine(seed);
      const pool = new DockerSandboxes(engine.docker, silentLogger, 2, { spareCheckIntervalMs: 20 });
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
      expect({ seed, orphanNetwork: engine.networks.has(gone), running: running(), problems: engine.problems }).toEqual({ seed, orphanNetwork: false, running: took ? 3 : 2, problems: [] });
      expect({ seed, networksWithoutSandbox: [...engine.networks.keys()].filter((name) => !engine.containers.has(name)) }).toEqual({ seed, networksWithoutSandbox: [] });
    }
  });
});
