// Network sandboxes: every deployment gets a bridge network of its own, held by
// a tiny "sandbox" container whose network namespace the tenant's container
// joins (NetworkMode container:<sandbox>), as Kubernetes pods join their pause
// container. Why not simply create the deployment's network and start the
// container on it? Measured on Docker 20.10 (bench/README.md): creating a bridge
// network costs ~100-200 ms and starting a container on a user-defined network
// ~70 ms more than on the default bridge, while joining a namespace that is
// already set up starts ~100 ms faster than the default bridge. So the agent
// keeps a few sandboxes ready and a deployment takes one: isolation stays one
// network per deployment, and the network's setup is off the deploy path.
//
// A sandbox is never reused: when its tenant's container is removed, it goes too.
// When that container ends or goes behind the agent's back (`docker kill`,
// `docker stop`, `docker rm -f`), the pool removes its sandbox itself as soon as
// the engine says so (its event stream), or at its next look (converge()):
// otherwise each would hold a bridge network, from Docker's limited address
// pools, until the tenant removed the deployment.
//
// This file is the pool's policy; what it asks of the engine is sandbox-engine.ts
// (on Docker: docker-sandbox-engine.ts).
import { randomBytes } from "node:crypto";
import { bridgeName, DEFAULT_BRIDGE_PREFIX } from "./create-options";
import { LABEL_INSTALL_ID, LABEL_NODE_ID, LABEL_SANDBOX, LABEL_SANDBOX_NAME } from "./labels";
import type { RuntimeLogger } from "./logger";
import { type SandboxEngine, type SandboxHolder, SandboxVanishedError } from "./sandbox-engine";
import {
  DEFAULT_MAKING_GRACE_MS,
  DEFAULT_SANDBOX_POOL,
  DEFAULT_SPARE_CHECK_INTERVAL_MS,
  REFILL_DELAY_MS,
  type SandboxOwner,
  type SandboxPoolOptions,
} from "./sandbox-settings";

export type { SandboxOwner, SandboxPoolOptions } from "./sandbox-settings";
export { DEFAULT_MAKING_GRACE_MS, DEFAULT_SANDBOX_POOL, DEFAULT_SPARE_CHECK_INTERVAL_MS } from "./sandbox-settings";

/** A tenant's container in these states is over: the agent never starts a run again, so its sandbox has no more use. */
const ENDED_STATES = new Set(["exited", "dead"]);

export class SandboxPool {
  private owner: SandboxOwner | undefined;
  /** ready and unclaimed; changed in place only (an await may hold on to it) */
  private readonly spares: string[] = [];
  private readonly addresses = new Map<string, string>();
  private filling: Promise<void> | undefined;
  private refillTimer: NodeJS.Timeout | undefined;
  private checkTimer: NodeJS.Timeout | undefined;
  private checking = false;
  /** something happened while converge() ran: it runs once more */
  private checkAgain = false;
  private refillPending = false;
  private unwatch: (() => void) | undefined;
  private warming = false;
  /** taking back a previous agent's spares; take() waits for it, so they are used first */
  private adoption: Promise<void> = Promise.resolve();
  /** handed to a deployment: never a spare again, even before its container exists */
  private readonly taken = new Set<string>();
  /** handed out, its container not made yet (joined() ends it): converge() must not take it for one whose container is gone */
  private readonly joining = new Set<string>();
  /** being made right now: adopt() must not take them for debris */
  private readonly creating = new Set<string>();
  /** being removed right now: neither a spare nor adoptable */
  private readonly removing = new Set<string>();
  private adoptedFor: string | undefined;

  constructor(
    private readonly engine: SandboxEngine,
    private readonly logger: RuntimeLogger,
    private readonly poolSize = DEFAULT_SANDBOX_POOL,
    private readonly options: SandboxPoolOptions = {},
  ) {}

  /** Keeps `poolSize` sandboxes ready for `owner`: adopts those a previous agent left, makes the rest. */
  keepWarm(owner: SandboxOwner): void {
    if (this.owner && this.owner.nodeId !== owner.nodeId) {
      // Re-enrolled as another node: the old node's spares are of no use to anyone.
      for (const name of this.spares.splice(0)) void this.remove(name).catch(() => {});
    }
    this.owner = owner;
    this.warming = true;
    if (this.adoptedFor !== owner.nodeId) {
      this.adoptedFor = owner.nodeId;
      this.adoption = this.adopt(owner).catch((error: unknown) =>
        this.logger.warn("Could not look for unused network sandboxes", { error: (error as Error).message }),
      );
    }
    void this.adoption.then(() => {
      this.fillSoon(0);
      // Tenants' containers that ended while no agent watched (no event will say so) free their sandboxes now, not at the first interval.
      void this.converge();
    });
    // With no spares to keep too: a tenant's sandbox left by a container killed out of band holds a network all the same.
    if (!this.checkTimer) {
      this.checkTimer = setInterval(() => void this.converge(), this.options.spareCheckIntervalMs ?? DEFAULT_SPARE_CHECK_INTERVAL_MS);
      this.checkTimer.unref();
    }
    const events = this.options.events;
    if (!this.unwatch && events) {
      const onEnd = events.onContainerEnd((end) => {
        if (end.labels[LABEL_SANDBOX_NAME] || end.labels[LABEL_SANDBOX] === "true") void this.converge();
      });
      const onBack = events.onEngineBack(() => void this.converge());
      this.unwatch = () => {
        onEnd();
        onBack();
      };
    }
  }

  /** Stops making sandboxes; ready ones stay for the next agent. Settles when none is being made. */
  async stopWarming(): Promise<void> {
    this.warming = false;
    clearTimeout(this.refillTimer);
    clearInterval(this.checkTimer);
    this.checkTimer = undefined;
    this.unwatch?.();
    this.unwatch = undefined;
    await this.filling;
  }

  /**
   * The node was retired: stops making sandboxes, then removes each one made
   * for `owner` that no container uses (the spares, and any a previous agent
   * left) with its network. Those in use go with their tenants' containers.
   */
  async discard(owner: SandboxOwner): Promise<void> {
    await this.stopWarming();
    await this.adoption;
    const labels = this.ownerLabels(owner);
    const inUse = new Set((await this.engine.listUsers()).map((user) => user.sandbox));
    for (const holder of await this.engine.listSandboxes(labels)) {
      if (holder.name && !inUse.has(holder.name)) await this.remove(holder.name);
    }
    for (const network of await this.engine.listNetworks(labels)) {
      if (inUse.has(network.name)) continue;
      await this.engine.removeNetwork(network.name).catch(() => {});
    }
  }

  /** The name of a running sandbox for a new container of `owner`: a ready one when there is one, else made now. */
  async take(owner: SandboxOwner): Promise<string> {
    const pooled = this.owner?.nodeId === owner.nodeId;
    if (pooled) await this.adoption;
    let name: string | undefined;
    while (pooled && !name && this.spares.length > 0) {
      const candidate = this.spares.shift()!;
      this.taken.add(candidate); // claimed before the await below: nothing else may hand it out meanwhile
      this.joining.add(candidate);
      // An operator may have stopped it, or the host rebooted since it was made.
      if (await this.engine.running(candidate).catch(() => false)) name = candidate;
      else void this.remove(candidate).catch(() => {});
    }
    if (pooled) this.fillSoon(REFILL_DELAY_MS);
    if (!name) {
      name = await this.create(owner);
      this.taken.add(name);
      this.joining.add(name);
      this.creating.delete(name);
    }
    return name;
  }

  /** The container that takes `name` was made: from now on, that container ending or going is the sandbox's end too. */
  joined(name: string): void {
    this.joining.delete(name);
  }

  /** Removes the sandbox and its network; already gone is not an error. */
  async remove(name: string): Promise<void> {
    this.removing.add(name);
    const spare = this.spares.indexOf(name);
    if (spare >= 0) this.spares.splice(spare, 1);
    this.logger.debug("Removing sandbox", { sandbox: name });
    try {
      await this.engine.removeContainer(name);
      await this.engine.removeNetwork(name);
    } finally {
      this.removing.delete(name);
      this.taken.delete(name);
      this.joining.delete(name);
      this.addresses.delete(name);
    }
  }

  /** The sandbox's address on its network: the address of every container that joined it. */
  async address(name: string): Promise<string | null> {
    const known = this.addresses.get(name);
    if (known) return known;
    const address = await this.engine.address(name);
    if (address) this.addresses.set(name, address);
    return address;
  }

  /**
   * Converges on what the engine shows: spares no longer running go, and so
   * does every sandbox of this node whose tenant's container ended or is gone
   * (each with its network); then the pool is refilled to its size. Called on
   * an interval and whenever a container ends (options.events); a call while
   * one runs makes it run once more.
   */
  private async converge(): Promise<void> {
    if (!this.warming) return;
    if (this.checking) {
      this.checkAgain = true;
      return;
    }
    this.checking = true;
    try {
      do {
        this.checkAgain = false;
        await this.convergeOnce().catch((error: unknown) => this.logger.warn("Could not look at the network sandboxes", { error: (error as Error).message }));
      } while (this.checkAgain && this.warming);
    } finally {
      this.checking = false;
    }
  }

  private async convergeOnce(): Promise<void> {
    const owner = this.owner;
    if (!owner) return;
    let lost = 0;
    for (const name of [...this.spares]) {
      const running = await this.engine.running(name).catch(() => true); // the engine unreachable: nothing learnt
      // Taken meanwhile: it is the taker's now (take() looks again itself).
      if (running || !this.spares.includes(name)) continue;
      lost += 1;
      await this.remove(name).catch((error: unknown) =>
        this.logger.warn("Could not remove a lost network sandbox", { sandbox: name, error: (error as Error).message }),
      );
    }
    if (lost > 0) this.logger.warn("Network sandboxes were stopped or removed outside the agent; making new ones", { count: lost });
    const freed = await this.removeUnused(owner);
    if (freed > 0) this.logger.warn("Removed the network sandboxes of containers that ended or were removed outside the agent", { count: freed });
    if (lost > 0 || (this.spares.length < this.poolSize && !this.filling && !this.refillPending)) this.fillSoon(0);
  }

  /** Removes this node's sandboxes (and networks) that are neither spare nor held by a container that is not over; answers how many. */
  private async removeUnused(owner: SandboxOwner): Promise<number> {
    // Copied before the listings: a container made after them is not in them, and its sandbox was
    // then being made, a spare or joining (a sandbox moves between those without an await).
    const before = new Set([...this.creating, ...this.spares, ...this.joining]);
    const held = (name: string) =>
      before.has(name) || this.spares.includes(name) || this.creating.has(name) || this.removing.has(name) || this.joining.has(name);
    const labels = this.ownerLabels(owner);
    const users = new Map<string, boolean>(); // sandbox -> whether a container that has not ended uses it
    for (const user of await this.engine.listUsers()) {
      users.set(user.sandbox, users.get(user.sandbox) === true || !ENDED_STATES.has(user.state));
    }
    const holders = await this.engine.listSandboxes(labels);
    const networks = await this.engine.listNetworks(labels);
    let freed = 0;
    const free = async (name: string) => {
      freed += 1;
      await this.remove(name).catch((error: unknown) =>
        this.logger.warn("Could not remove an unused network sandbox", { sandbox: name, error: (error as Error).message }),
      );
    };
    for (const { name, ...holder } of holders) {
      if (!name || held(name) || users.get(name) || this.beingMade(holder)) continue;
      await free(name);
    }
    // A sandbox removed by hand leaves its network; one this pool does not know and made just now is another pool's being made.
    const names = new Set(holders.map((holder) => holder.name));
    for (const network of networks) {
      if (names.has(network.name) || held(network.name) || users.get(network.name)) continue;
      if (!this.known(network.name) && this.young(network.createdMs)) continue;
      await free(network.name);
    }
    return freed;
  }

  private fillSoon(delayMs: number): void {
    clearTimeout(this.refillTimer);
    this.refillPending = true;
    this.refillTimer = setTimeout(() => {
      this.refillPending = false;
      if (!this.warming) return;
      // One fill at a time; one still busy (perhaps for a node this agent no longer is) goes first.
      if (this.filling) return void this.filling.then(() => this.fillSoon(0));
      this.filling = this.fill()
        .catch((error: unknown) =>
          this.logger.warn("Could not prepare network sandboxes; deployments will make their own", { error: (error as Error).message }),
        )
        .finally(() => (this.filling = undefined));
    }, delayMs);
    this.refillTimer.unref();
  }

  /** One at a time, so filling the pool never crowds the engine. */
  private async fill(): Promise<void> {
    const owner = this.owner;
    if (!owner) return;
    const same = () => this.owner?.nodeId === owner.nodeId; // a reconnect brings a new owner object for the same node
    while (this.warming && same() && this.spares.length < this.poolSize) {
      const made = await this.create(owner);
      // The agent may have been enrolled as another node while it was being made.
      // (If warming stopped meanwhile, it stays a spare: the next agent adopts it.)
      try {
        if (same() && this.spares.length < this.poolSize) this.spares.push(made);
        else await this.remove(made);
      } finally {
        this.creating.delete(made);
      }
    }
  }

  /** Takes back the unused sandboxes of this owner (a restarted agent's), and removes the broken ones. */
  private async adopt(owner: SandboxOwner): Promise<void> {
    const labels = this.ownerLabels(owner);
    const inUse = new Set((await this.engine.listUsers()).map((user) => user.sandbox));
    const holders = await this.engine.listSandboxes(labels);
    const networks = await this.engine.listNetworks(labels);
    // A spare whose bridge is not named for the egress policy (an older agent made it) escapes the policy: never hand it out.
    const policed = new Set(networks.filter((network) => network.bridge === this.bridgeNameOf(network.name)).map((network) => network.name));
    for (const { name, ...holder } of holders) {
      if (!name || inUse.has(name) || this.known(name) || this.beingMade(holder)) continue;
      if (holder.state === "running" && policed.has(name) && this.spares.length < this.poolSize) this.spares.push(name);
      else await this.remove(name);
    }
    // A network whose sandbox container never got made (the agent died in between).
    const names = new Set(holders.map((holder) => holder.name));
    for (const network of networks) {
      if (names.has(network.name) || this.known(network.name) || this.young(network.createdMs)) continue;
      // One made since the listing above is in use: the engine refuses, and that is fine.
      await this.engine.removeNetwork(network.name).catch(() => {});
    }
    if (this.spares.length > 0) this.logger.debug("Adopted network sandboxes", { count: this.spares.length });
    if (owner.installId) await this.removePreviousEnrolments(owner, owner.installId, inUse);
  }

  /**
   * This install's unused sandboxes and networks made for another node: the
   * machine was enrolled again and nothing will take them. In-use ones go with
   * their tenant's container, which the reconciler removes.
   */
  private async removePreviousEnrolments(owner: SandboxOwner, installId: string, inUse: Set<string>): Promise<void> {
    const labels = { [LABEL_INSTALL_ID]: installId, ...owner.labels };
    const stale = (found: Record<string, string>, name: string) => found[LABEL_NODE_ID] !== owner.nodeId && !inUse.has(name) && !this.known(name);
    let removed = 0;
    for (const { name, ...holder } of await this.engine.listSandboxes(labels)) {
      if (!name || !stale(holder.labels, name) || this.beingMade(holder)) continue;
      await this.remove(name);
      removed += 1;
    }
    for (const network of await this.engine.listNetworks(labels)) {
      if (!stale(network.labels, network.name) || this.young(network.createdMs)) continue;
      await this.engine.removeNetwork(network.name).catch(() => {});
    }
    if (removed > 0) this.logger.warn("Removed network sandboxes a previous enrolment of this machine left", { count: removed });
  }

  /** This node's sandboxes (containers and networks) among this agent's. */
  private ownerLabels(owner: SandboxOwner): Record<string, string> {
    return { [LABEL_NODE_ID]: owner.nodeId, ...owner.labels };
  }

  private bridgeNameOf(sandbox: string): string {
    return bridgeName(sandbox, this.options.bridgePrefix ?? DEFAULT_BRIDGE_PREFIX);
  }

  private young(createdMs: number): boolean {
    return Date.now() - createdMs < (this.options.makingGraceMs ?? DEFAULT_MAKING_GRACE_MS);
  }

  /** Made, not started yet, and recently: see DEFAULT_MAKING_GRACE_MS. */
  private beingMade(holder: Pick<SandboxHolder, "state" | "createdMs">): boolean {
    return holder.state === "created" && this.young(holder.createdMs);
  }

  /** In one of this pool's hands: ready, claimed, being made or being removed. */
  private known(name: string): boolean {
    return this.spares.includes(name) || this.taken.has(name) || this.creating.has(name) || this.removing.has(name);
  }

  /** Left in `creating` when it answers: the caller records it (spare or taken), then lets go, so converge() never sees it in no hand. */
  private async create(owner: SandboxOwner, imageRetry = true): Promise<string> {
    await this.engine.prepare();
    const name = `cm-sbx-${randomBytes(6).toString("hex")}`;
    const labels = { ...owner.labels, [LABEL_NODE_ID]: owner.nodeId, ...(owner.installId ? { [LABEL_INSTALL_ID]: owner.installId } : {}) };
    this.logger.debug("Creating network sandbox", { sandbox: name });
    this.creating.add(name);
    try {
      await this.engine.create({ name, labels, bridgePrefix: this.options.bridgePrefix });
      return name;
    } catch (error) {
      await this.remove(name).catch(() => {});
      this.creating.delete(name);
      if (imageRetry && error instanceof SandboxVanishedError) {
        // The image was removed (an operator's `docker image prune`): make it again, once.
        return this.create(owner, false);
      }
      throw error;
    }
  }
}
