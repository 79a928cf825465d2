// The network sandbox pool's engine (src/runtime/sandbox-engine.ts) in memory,
// so the pool's policy (fill, take, refill, adopt, notice what an operator
// removed) is tested without Docker; DockerSandboxEngine is tested against real
// Docker (sandboxes*.test.ts), and both against sandbox-engine-contract.ts.
//
// With a seed, each call answers after a seeded random delay (real timers), so
// many interleavings can be tried and a failing one replays exactly. Without,
// calls answer at once, and the pool's own timers are all that moves time.
import { bridgeName, DEFAULT_BRIDGE_PREFIX } from "../../src/runtime/create-options";
import { LABEL_SANDBOX, LABEL_SANDBOX_NAME } from "../../src/runtime/labels";
import type { NewSandbox, SandboxEngine, SandboxHolder, SandboxNetwork, SandboxUser } from "../../src/runtime/sandbox-engine";
import { SandboxVanishedError } from "../../src/runtime/sandbox-engine";

/** A sandbox, or a tenant's container in one (labelled cm.sandbox-name), as `docker ps -a` would show it. */
export interface MemoryContainer {
  name: string;
  labels: Record<string, string>;
  createdMs: number;
  /** "exited": stopped or killed by an operator, or the host rebooted */
  state: "created" | "running" | "exited";
}

export interface MemoryNetwork {
  labels: Record<string, string>;
  createdMs: number;
  bridge?: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class MemorySandboxEngine implements SandboxEngine {
  readonly containers = new Map<string, MemoryContainer>();
  readonly networks = new Map<string, MemoryNetwork>();
  /** what must never happen, whatever the interleaving */
  readonly problems: string[] = [];
  /** whether the sandbox image is on the engine; false: an operator pruned it */
  imagePresent = false;
  /** how many times the image was made */
  imagesMade = 0;
  /** the image as this engine last knew it, as DockerSandboxEngine keeps it */
  private imageKnown = false;
  private state: number;

  constructor(private readonly options: { seed?: number } = {}) {
    this.state = options.seed ?? 0;
  }

  /** mulberry32: the same seed, the same orderings */
  random(): number {
    this.state = (this.state + 0x6d2b79f5) | 0;
    let t = Math.imul(this.state ^ (this.state >>> 15), 1 | this.state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  async listSandboxes(labels: Record<string, string>): Promise<SandboxHolder[]> {
    await this.delay();
    return [...this.containers.values()]
      .filter((c) => c.labels[LABEL_SANDBOX] === "true" && matches(c.labels, labels))
      .map((c) => ({ name: c.name, state: c.state, createdMs: c.createdMs, labels: c.labels }));
  }

  async listNetworks(labels: Record<string, string>): Promise<SandboxNetwork[]> {
    await this.delay();
    return [...this.networks]
      .filter(([, n]) => n.labels[LABEL_SANDBOX] === "true" && matches(n.labels, labels))
      .map(([name, n]) => ({ name, createdMs: n.createdMs, labels: n.labels, bridge: n.bridge }));
  }

  async listUsers(): Promise<SandboxUser[]> {
    await this.delay();
    return [...this.containers.values()].filter((c) => LABEL_SANDBOX_NAME in c.labels).map((c) => ({ sandbox: c.labels[LABEL_SANDBOX_NAME]!, state: c.state }));
  }

  // Answers at once even with a seed: a seed replays the same orderings whether or not the image was made first.
  async prepare(): Promise<void> {
    if (this.imageKnown) return;
    if (!this.imagePresent) {
      this.imagePresent = true;
      this.imagesMade += 1;
    }
    this.imageKnown = true;
  }

  async create({ name, labels, bridgePrefix }: NewSandbox): Promise<void> {
    await this.delay();
    if (this.networks.has(name)) throw new Error(`network with name ${name} already exists`);
    const stamped = { ...labels, [LABEL_SANDBOX]: "true" };
    this.networks.set(name, { labels: stamped, createdMs: Date.now(), bridge: bridgeName(name, bridgePrefix ?? DEFAULT_BRIDGE_PREFIX) });
    await this.delay();
    if (!this.imagePresent) {
      this.imageKnown = false;
      throw new SandboxVanishedError("No such image: cm-sandbox");
    }
    const container: MemoryContainer = { name, labels: stamped, createdMs: Date.now(), state: "created" };
    this.containers.set(name, container);
    await this.delay();
    if (this.containers.get(name) !== container) throw new SandboxVanishedError(`No such container: ${name}`);
    container.state = "running";
  }

  async removeContainer(name: string): Promise<void> {
    await this.delay();
    const container = this.containers.get(name);
    if (!container) return;
    if (container.labels[LABEL_SANDBOX] !== "true") this.problems.push(`${name}, not a sandbox, removed by the pool`);
    if (container.state === "created") this.problems.push(`${name} removed while its maker was starting it`);
    this.containers.delete(name);
  }

  async removeNetwork(name: string): Promise<void> {
    await this.delay();
    // A sandbox holds its network: Docker refuses to remove a network with an endpoint.
    if (this.containers.get(name)?.labels[LABEL_SANDBOX] === "true") throw new Error(`error while removing network: network ${name} has active endpoints`);
    this.networks.delete(name);
  }

  async running(name: string): Promise<boolean> {
    await this.delay();
    return this.containers.get(name)?.state === "running";
  }

  async address(name: string): Promise<string | null> {
    return (await this.running(name)) ? "10.0.0.2" : null;
  }

  private async delay(): Promise<void> {
    if (this.options.seed !== undefined) await sleep(Math.floor(this.random() * 8));
  }
}

function matches(found: Record<string, string>, wanted: Record<string, string>): boolean {
  return Object.entries(wanted).every(([key, value]) => found[key] === value);
}
