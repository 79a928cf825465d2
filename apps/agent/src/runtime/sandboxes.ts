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
import { randomBytes } from "node:crypto";
import type Docker from "dockerode";
import { BRIDGE_NAME_OPTION, bridgeName, buildSandboxCreateOptions, buildSandboxNetworkOptions, DEFAULT_BRIDGE_PREFIX } from "./create-options";
import { dockerStatusCode, ignoringStatus } from "./errors";
import { LABEL_INSTALL_ID, LABEL_NODE_ID, LABEL_SANDBOX, LABEL_SANDBOX_NAME } from "./labels";
import type { RuntimeLogger } from "./logger";
import { SandboxImage } from "./sandbox-image";
import {
  CONFLICT,
  DEFAULT_MAKING_GRACE_MS,
  DEFAULT_SANDBOX_POOL,
  DEFAULT_SPARE_CHECK_INTERVAL_MS,
  NOT_FOUND,
  REFILL_DELAY_MS,
  REMOVAL_WAIT_MS,
  type SandboxOwner,
  type SandboxPoolOptions,
} from "./sandbox-settings";

export type { SandboxOwner, SandboxPoolOptions } from "./sandbox-settings";
export { DEFAULT_MAKING_GRACE_MS, DEFAULT_SANDBOX_POOL, DEFAULT_SPARE_CHECK_INTERVAL_MS } from "./sandbox-settings";

/** A tenant's container in these states is over: the agent never starts a run again, so its sandbox has no more use. */
const ENDED_STATES = new Set(["exited", "dead"]);

export class DockerSandboxes {
  private owner: SandboxOwner | undefined;
  /** ready and unclaimed; changed in place only (an await may hold on to it) */
  private readonly spares: string[] = [];
  private readonly addresses = new Map<string, string>();
  private readonly sandboxImage: SandboxImage;
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
    private readonly docker: Docker,
    private readonly logger: RuntimeLogger,
    private readonly poolSize = DEFAULT_SANDBOX_POOL,
    private readonly options: SandboxPoolOptions = {},
  ) {
    this.sandboxImage = new SandboxImage(docker, logger);
  }

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
    const filters = { label: [`${LABEL_SANDBOX}=true`, `${LABEL_NODE_ID}=${owner.nodeId}`, ...Object.entries(owner.labels).map(([k, v]) => `${k}=${v}`)] };
    const joined = await this.docker.listContainers({ all: true, filters: { label: [LABEL_SANDBOX_NAME] } });
    const inUse = new Set(joined.map((container) => container.Labels[LABEL_SANDBOX_NAME]));
    const holders = await this.docker.listContainers({ all: true, filters });
    for (const holder of holders) {
      const name = holder.Names[0]?.replace(/^\//, "") ?? "";
      if (name && !inUse.has(name)) await this.remove(name);
    }
    for (const network of await this.docker.listNetworks({ filters })) {
      if (inUse.has(network.Name)) continue;
      await ignoringStatus(NOT_FOUND, () => this.docker.getNetwork(network.Name).remove()).catch(() => {});
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
      if (await this.running(candidate).catch(() => false)) name = candidate;
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
      await this.removeContainer(name);
      await ignoringStatus(NOT_FOUND, () => this.docker.getNetwork(name).remove());
    } finally {
      this.removing.delete(name);
      this.taken.delete(name);
      this.joining.delete(name);
      this.addresses.delete(name);
    }
  }

  /** Gone when this settles: a removal someone else began (`docker rm -f`) is waited for, since its network is in use until then. */
  private async removeContainer(name: string): Promise<void> {
    const container = this.docker.getContainer(name);
    try {
      await container.remove({ force: true });
    } catch (error) {
      const status = dockerStatusCode(error);
      if (status === NOT_FOUND) return;
      // Only "removal already in progress" is waited for, and not forever: any other conflict is an error to report.
      if (status !== CONFLICT || !/already in progress/i.test((error as Error).message)) throw error;
      let timer: NodeJS.Timeout | undefined;
      const patience = new Promise<never>(
        (_, reject) =>
          (timer = setTimeout(() => reject(new Error(`sandbox ${name} was still being removed after ${REMOVAL_WAIT_MS / 1000} s`)), REMOVAL_WAIT_MS)),
      );
      try {
        await Promise.race([ignoringStatus(NOT_FOUND, () => container.wait({ condition: "removed" })), patience]);
      } finally {
        clearTimeout(timer);
      }
    }
  }

  /** The sandbox's address on its network: the address of every container that joined it. */
  async address(name: string): Promise<string | null> {
    const known = this.addresses.get(name);
    if (known) return known;
    try {
      const info = await this.docker.getContainer(name).inspect();
      const address = info.State.Running ? info.NetworkSettings?.Networks?.[name]?.IPAddress || null : null;
      if (address) this.addresses.set(name, address);
      return address;
    } catch (error) {
      if (dockerStatusCode(error) === NOT_FOUND) return null;
      throw error;
    }
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
      const running = await this.running(name).catch(() => true); // Docker unreachable: nothing learnt
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
    const filters = this.ownerFilters(owner);
    const users = new Map<string, boolean>(); // sandbox -> whether a container that has not ended uses it
    for (const user of await this.docker.listContainers({ all: true, filters: { label: [LABEL_SANDBOX_NAME] } })) {
      const name = user.Labels[LABEL_SANDBOX_NAME] ?? "";
      users.set(name, users.get(name) === true || !ENDED_STATES.has(user.State));
    }
    const holders = await this.docker.listContainers({ all: true, filters });
    const networks = await this.docker.listNetworks({ filters });
    let freed = 0;
    const free = async (name: string) => {
      freed += 1;
      await this.remove(name).catch((error: unknown) =>
        this.logger.warn("Could not remove an unused network sandbox", { sandbox: name, error: (error as Error).message }),
      );
    };
    for (const holder of holders) {
      const name = holder.Names[0]?.replace(/^\//, "") ?? "";
      if (!name || held(name) || users.get(name) || this.beingMade(holder)) continue;
      await free(name);
    }
    // A sandbox removed by hand leaves its network; one this pool does not know and made just now is another pool's being made.
    const names = new Set(holders.map((holder) => holder.Names[0]?.replace(/^\//, "")));
    for (const network of networks) {
      if (names.has(network.Name) || held(network.Name) || users.get(network.Name)) continue;
      if (!this.known(network.Name) && this.young(Date.parse(network.Created))) continue;
      await free(network.Name);
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
    const filters = this.ownerFilters(owner);
    const joined = await this.docker.listContainers({ all: true, filters: { label: [LABEL_SANDBOX_NAME] } });
    const inUse = new Set(joined.map((container) => container.Labels[LABEL_SANDBOX_NAME]));
    const holders = await this.docker.listContainers({ all: true, filters });
    const networks = await this.docker.listNetworks({ filters });
    // A spare whose bridge is not named for the egress policy (an older agent made it) escapes the policy: never hand it out.
    const policed = new Set(
      networks.filter((network) => network.Options?.[BRIDGE_NAME_OPTION] === this.bridgeNameOf(network.Name)).map((network) => network.Name),
    );
    for (const holder of holders) {
      const name = holder.Names[0]?.replace(/^\//, "") ?? "";
      if (!name || inUse.has(name) || this.known(name) || this.beingMade(holder)) continue;
      if (holder.State === "running" && policed.has(name) && this.spares.length < this.poolSize) this.spares.push(name);
      else await this.remove(name);
    }
    // A network whose sandbox container never got made (the agent died in between).
    const names = new Set(holders.map((holder) => holder.Names[0]?.replace(/^\//, "")));
    for (const network of networks) {
      if (names.has(network.Name) || this.known(network.Name) || this.young(Date.parse(network.Created))) continue;
      // One made since the listing above is in use: Docker refuses, and that is fine.
      await ignoringStatus(NOT_FOUND, () => this.docker.getNetwork(network.Name).remove()).catch(() => {});
    }
    if (this.spares.length > 0) this.logger.debug("Adopted network sandboxes", { count: this.spares.length });
    if (owner.installId) await this.removePreviousEnrolments(owner, owner.installId, inUse);
  }

  /**
   * This install's unused sandboxes and networks made for another node: the
   * machine was enrolled again and nothing will take them. In-use ones go with
   * their tenant's container, which the reconciler removes.
   */
  private async removePreviousEnrolments(owner: SandboxOwner, installId: string, inUse: Set<string | undefined>): Promise<void> {
    const filters = { label: [`${LABEL_SANDBOX}=true`, `${LABEL_INSTALL_ID}=${installId}`, ...Object.entries(owner.labels).map(([k, v]) => `${k}=${v}`)] };
    const stale = (labels: Record<string, string> | undefined, name: string) =>
      labels?.[LABEL_NODE_ID] !== owner.nodeId && !inUse.has(name) && !this.known(name);
    let removed = 0;
    for (const holder of await this.docker.listContainers({ all: true, filters })) {
      const name = holder.Names[0]?.replace(/^\//, "") ?? "";
      if (!name || !stale(holder.Labels, name) || this.beingMade(holder)) continue;
      await this.remove(name);
      removed += 1;
    }
    for (const network of await this.docker.listNetworks({ filters })) {
      if (!stale(network.Labels, network.Name) || this.young(Date.parse(network.Created))) continue;
      await ignoringStatus(NOT_FOUND, () => this.docker.getNetwork(network.Name).remove()).catch(() => {});
    }
    if (removed > 0) this.logger.warn("Removed network sandboxes a previous enrolment of this machine left", { count: removed });
  }

  /** This node's sandboxes (containers and networks) among this agent's. */
  private ownerFilters(owner: SandboxOwner) {
    return { label: [`${LABEL_SANDBOX}=true`, `${LABEL_NODE_ID}=${owner.nodeId}`, ...Object.entries(owner.labels).map(([k, v]) => `${k}=${v}`)] };
  }

  private bridgeNameOf(sandbox: string): string {
    return bridgeName(sandbox, this.options.bridgePrefix ?? DEFAULT_BRIDGE_PREFIX);
  }

  private young(createdMs: number): boolean {
    return Date.now() - createdMs < (this.options.makingGraceMs ?? DEFAULT_MAKING_GRACE_MS);
  }

  /** Made, not started yet, and recently: see DEFAULT_MAKING_GRACE_MS. */
  private beingMade(holder: Docker.ContainerInfo): boolean {
    return holder.State === "created" && this.young(holder.Created * 1000);
  }

  /** In one of this pool's hands: ready, claimed, being made or being removed. */
  private known(name: string): boolean {
    return this.spares.includes(name) || this.taken.has(name) || this.creating.has(name) || this.removing.has(name);
  }

  /** Left in `creating` when it answers: the caller records it (spare or taken), then lets go, so converge() never sees it in no hand. */
  private async create(owner: SandboxOwner, imageRetry = true): Promise<string> {
    const image = await this.sandboxImage.get();
    const name = `cm-sbx-${randomBytes(6).toString("hex")}`;
    const labels = { ...owner.labels, [LABEL_NODE_ID]: owner.nodeId, ...(owner.installId ? { [LABEL_INSTALL_ID]: owner.installId } : {}) };
    this.logger.debug("Creating network sandbox", { sandbox: name });
    this.creating.add(name);
    try {
      await this.docker.createNetwork(buildSandboxNetworkOptions(name, labels, this.options.bridgePrefix));
      const container = await this.docker.createContainer(buildSandboxCreateOptions(name, image, labels));
      await container.start();
      return name;
    } catch (error) {
      await this.remove(name).catch(() => {});
      this.creating.delete(name);
      if (imageRetry && dockerStatusCode(error) === NOT_FOUND) {
        // The image was removed (an operator's `docker image prune`): make it again, once.
        this.sandboxImage.forget();
        return this.create(owner, false);
      }
      throw error;
    }
  }

  private async running(name: string): Promise<boolean> {
    try {
      return (await this.docker.getContainer(name).inspect()).State.Running;
    } catch (error) {
      if (dockerStatusCode(error) === NOT_FOUND) return false;
      throw error;
    }
  }
}
