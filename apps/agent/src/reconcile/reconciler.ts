// Converges the node towards the control plane's desired state. Docker is the
// source of truth: every convergence looks at the deployment's containers (found
// by label) and does only what is missing, so converging twice does nothing the
// second time, and a restarted agent picks up where the last one left off.
import { type CommandAction, type DeploymentSpec, KeyedQueue } from "@cm/protocol";
import { dockerMessage } from "../runtime/errors";
import { LABEL_DEPLOYMENT_ID } from "../runtime/labels";
import { hideNetworkDetails } from "../runtime/network-details";
import type { ContainerExit, ContainerState } from "../runtime/types";
import { describeExit } from "./exit-reason";
import { ExitWatcher } from "./exit-watcher";
import { runSeqOf } from "./labels";
import { ownRunningContainer } from "./own-container";
import { leftByPreviousEnrolment, removeLeftOver } from "./previous-enrolment";
import type { ConvergeResult, ReconcilerOptions } from "./reconciler-options";
import { RunWaits } from "./run-waits";
import { DeploymentFailure, startDeployment } from "./start-deployment";

export type { ConvergeResult, ReconcilerOptions } from "./reconciler-options";

const DESIRED_BY_ACTION = { create: "running", start: "running", stop: "stopped", remove: "removed" } as const;
/** how long an ending container's last log lines may take to go out before its status does */
const LOG_DRAIN_MS = 2_000;
/**
 * The same before a container no longer wanted is stopped for good or removed:
 * it may hold everything written while the agent was away, and once removed its
 * log is gone.
 */
const FINAL_LOG_DRAIN_MS = 15_000;

export class Reconciler {
  private readonly queue = new KeyedQueue();
  private readonly gpuLock = new KeyedQueue();
  private readonly watcher: ExitWatcher;
  /** the newest desired spec per deployment: older queued ones are skipped */
  private readonly latest = new Map<string, DeploymentSpec>();
  /** deploymentId -> its running container, for heartbeats */
  private readonly runningNow = new Map<string, ContainerState>();
  /** containers the agent is stopping on purpose: their exit is not news */
  private readonly deliberate = new Set<string>();
  /** runs that failed to start, so a repeated sync reports instead of retrying */
  private readonly failedRuns = new Map<string, { runSeq: number; reason: string }>();
  /** a restart's backoff and an image pull: what a newer desired state ends */
  private readonly waits: RunWaits;
  private nodeId = "";

  constructor(private readonly options: ReconcilerOptions) {
    this.watcher = new ExitWatcher(options.runtime, options.clock, options.logger);
    this.waits = new RunWaits(options.clock, options.logger);
  }

  /**
   * Looks at the managed containers on the engine (rejecting when Docker cannot
   * be reached) and claims none: which are this node's is known at welcome.
   */
  async adopt(): Promise<ContainerState[]> {
    const containers = await this.options.runtime.listManaged(this.options.containerLabels);
    this.options.logger.debug("Managed containers on this Docker engine", { total: containers.length, running: containers.filter((c) => c.running).length });
    return containers;
  }

  /** The control plane said which node this is: take over the running containers a previous agent of this node left. */
  setNodeId(nodeId: string): void {
    if (nodeId === this.nodeId) return;
    this.nodeId = nodeId;
    void this.claim(nodeId);
  }

  private async claim(nodeId: string): Promise<void> {
    const containers = await this.options.runtime.listManaged(this.options.containerLabels).catch(() => []);
    const ours = containers.filter((container) => container.nodeId === nodeId);
    if (this.nodeId !== nodeId) return;
    // In each deployment's turn, as the sync's own work is: by then the sync may
    // have replaced or removed the container this (older) list shows running.
    const claims = ours
      .filter((c) => c.running)
      .map((container) =>
        this.queue.run(container.deploymentId, async () => {
          if (this.nodeId !== nodeId || this.runningNow.has(container.deploymentId)) return;
          const now = await this.options.runtime.inspect(container.id).catch(() => undefined);
          if (now?.running) this.track(now);
        }),
      );
    await Promise.all(claims);
    this.options.logger.info("Adopted existing containers", { nodeId, total: ours.length, running: ours.filter((c) => c.running).length });
  }

  /** This node's deployments whose containers run (not those another registration of this machine left). */
  running(): string[] {
    return [...this.runningNow.values()]
      .filter((container) => !this.nodeId || container.nodeId === this.nodeId)
      .map((container) => container.deploymentId)
      .sort();
  }

  /** The running container of this node's deployment, looked up on the engine now: what exec and tunnels may enter. */
  runningContainer(deploymentId: string): Promise<ContainerState | undefined> {
    return ownRunningContainer(this.options.runtime, { labels: this.options.containerLabels, nodeId: this.nodeId }, deploymentId);
  }

  /** The full desired state: converge each deployment, and remove our containers it no longer lists. */
  async sync(specs: DeploymentSpec[]): Promise<void> {
    const wanted = new Set(specs.map((spec) => spec.deploymentId));
    const tasks: Promise<unknown>[] = specs.map((spec) => this.enqueue(spec));
    const ours = await this.options.runtime.listManaged(this.options.containerLabels).catch(() => []);
    for (const container of ours) {
      const id = container.deploymentId;
      if (container.nodeId !== this.nodeId) {
        if (leftByPreviousEnrolment(container, this.options.installId?.(), this.nodeId)) {
          tasks.push(this.queue.run(`enrolment:${container.id}`, () => removeLeftOver(this.options, container)));
        }
        continue;
      }
      if (wanted.has(id)) continue;
      this.latest.delete(id); // a command for it arriving after this sync will win again
      tasks.push(this.queue.run(id, () => this.removeOrphan(id)));
    }
    await Promise.all(tasks);
  }

  async command(action: CommandAction, deployment: DeploymentSpec): Promise<ConvergeResult> {
    return this.enqueue({ ...deployment, desiredState: DESIRED_BY_ACTION[action] });
  }

  /**
   * Ends a running deployment the node itself must end (past its disk
   * allowance), telling the tenant why; a container that is no longer the
   * deployment's running one is left alone.
   */
  stopForPolicy(deploymentId: string, containerId: string, reason: string): Promise<void> {
    return this.queue.run(deploymentId, async () => {
      const container = this.runningNow.get(deploymentId);
      if (container?.id !== containerId) return;
      await this.stopContainers(deploymentId, [container]);
      this.options.reporter.status(deploymentId, runSeqOf(container), "failed", { reason });
    });
  }

  /**
   * The node was retired: stops every container made for `nodeId` (their last
   * lines go out while the connection lasts) and removes it with its sandbox,
   * after whatever is already queued for its deployment. Answers how many
   * containers were removed; one Docker refuses to remove is logged and left.
   */
  async drain(nodeId: string): Promise<number> {
    const ours = (await this.options.runtime.listManaged(this.options.containerLabels)).filter((c) => c.nodeId === nodeId);
    let removed = 0;
    const byDeployment = new Map<string, ContainerState[]>();
    for (const c of ours) byDeployment.set(c.deploymentId, [...(byDeployment.get(c.deploymentId) ?? []), c]);
    await Promise.all(
      [...byDeployment].map(([deploymentId, containers]) =>
        this.queue.run(deploymentId, async () => {
          this.latest.delete(deploymentId);
          try {
            await this.stopContainers(deploymentId, containers);
            for (const container of containers) {
              await this.options.runtime.remove(container.id);
              removed += 1;
            }
          } catch (error) {
            this.options.logger.error("Could not remove a retired node's container", { deploymentId, error: dockerMessage(error) });
          }
          this.options.logs.stop(deploymentId);
        }),
      ),
    );
    return removed;
  }

  /** Stops watching; containers are left exactly as they are. */
  stop(): void {
    this.watcher.stop();
  }

  /** Settles when all queued work is done (tests). */
  idle(): Promise<void> {
    return this.queue.idle();
  }

  private enqueue(spec: DeploymentSpec): Promise<ConvergeResult> {
    this.latest.set(spec.deploymentId, spec);
    this.waits.newer(spec);
    return this.queue.run(spec.deploymentId, () => this.converge(spec));
  }

  private async converge(spec: DeploymentSpec): Promise<ConvergeResult> {
    if (this.latest.get(spec.deploymentId) !== spec) return { ok: true }; // a newer desired state is queued
    try {
      const containers = await this.containersOf(spec.deploymentId);
      // Whatever it asks, a desired state for an older run is stale: a newer run's container is never stopped or removed for it.
      if (containers.some((c) => runSeqOf(c) > spec.runSeq)) {
        this.options.logger.warn("Ignoring a desired state for an older run", {
          deploymentId: spec.deploymentId,
          runSeq: spec.runSeq,
          desiredState: spec.desiredState,
        });
        return { ok: true };
      }
      if (spec.desiredState === "running") return await this.convergeRunning(spec, containers);
      await this.stopContainers(spec.deploymentId, containers);
      if (!(await this.shipRemainingLogs(spec, containers))) {
        // Removing or reporting now would lose them: the next sync converges again, lines first.
        return { ok: false, error: "the connection dropped while the container's last log lines went out; continuing after the next sync" };
      }
      const expired = spec.removeAfter !== undefined && this.options.clock.now() >= spec.removeAfter;
      // A lost node's ended deployment: its stopped container (and the tenant's files) is kept until then.
      if (spec.removeAfter !== undefined && !expired)
        this.waits.later(spec, spec.removeAfter, () => {
          if (this.latest.get(spec.deploymentId) === spec) void this.enqueue(spec);
        });
      if (spec.desiredState === "removed" || expired) {
        for (const container of containers) await this.options.runtime.remove(container.id);
        this.options.logs.stop(spec.deploymentId);
        this.failedRuns.delete(spec.deploymentId);
        this.waits.forget(spec.deploymentId);
      }
      this.options.reporter.status(spec.deploymentId, spec.runSeq, spec.desiredState);
      return { ok: true };
    } catch (error) {
      const message = error instanceof DeploymentFailure ? error.message : dockerMessage(error);
      this.options.logger.error("Could not converge a deployment", { deploymentId: spec.deploymentId, desiredState: spec.desiredState, error: message });
      return { ok: false, error: message };
    }
  }

  private async convergeRunning(spec: DeploymentSpec, containers: ContainerState[]): Promise<ConvergeResult> {
    const { deploymentId, runSeq } = spec;
    const older = containers.filter((c) => runSeqOf(c) < runSeq);
    await this.stopContainers(deploymentId, older);
    for (const container of older) await this.options.runtime.remove(container.id);

    const current = containers.find((c) => runSeqOf(c) === runSeq);
    if (current?.running) {
      this.track(current);
      this.shipLogs(spec, current);
      this.options.reporter.status(deploymentId, runSeq, "running");
      return { ok: true };
    }
    if (current && current.startedAt !== null) {
      // It ran and ended by itself; the agent never restarts a run on its own.
      this.shipLogs(spec, current, true);
      const exit = { exitCode: current.exitCode ?? -1, oomKilled: current.oomKilled, error: current.error };
      const endedAtMs = Date.parse(current.finishedAt ?? "");
      this.options.reporter.status(deploymentId, runSeq, "exited", {
        exitCode: exit.exitCode,
        reason: describeExit(exit),
        ...(Number.isFinite(endedAtMs) ? { at: endedAtMs } : {}),
      });
      return { ok: true };
    }
    // Reported running, and gone: removed on the node behind the platform's back. Not started again (nobody asked for a new run).
    if (!current && spec.started) {
      this.options.reporter.status(deploymentId, runSeq, "removed", { reason: "the container was removed on the node, outside the platform" });
      return { ok: true };
    }
    // Created but never started (the last agent died in between): start afresh.
    if (current) await this.options.runtime.remove(current.id);
    const failed = this.failedRuns.get(deploymentId);
    if (failed?.runSeq === runSeq) {
      this.options.reporter.status(deploymentId, runSeq, "failed", { reason: failed.reason });
      return { ok: false, error: failed.reason };
    }
    if (spec.startDelayMs && !(await this.waits.backOff(spec, spec.startDelayMs, () => this.latest.get(deploymentId) === spec))) return { ok: true };
    return this.startRun(spec);
  }

  private async startRun(spec: DeploymentSpec): Promise<ConvergeResult> {
    const { deploymentId, runSeq } = spec;
    try {
      const container = await this.waits.starting(spec, (signal) =>
        startDeployment(
          {
            ...this.options,
            installId: this.options.installId?.(),
            nodeId: this.nodeId,
            gpuLock: this.gpuLock,
            superseded: () => this.latest.get(deploymentId) !== spec,
            signal,
          },
          spec,
        ),
      );
      if (!container) return { ok: true };
      this.track(container);
      this.shipLogs(spec, container);
      this.options.reporter.status(deploymentId, runSeq, "running");
      return { ok: true };
    } catch (error) {
      const docker = error instanceof DeploymentFailure ? error.message : `could not start the deployment: ${dockerMessage(error)}`;
      this.options.logger.warn("A deployment failed to start", { deploymentId, runSeq, reason: docker });
      // The tenant reads it: Docker's words without the node's addresses.
      const reason = hideNetworkDetails(docker, [spec.image]);
      this.failedRuns.set(deploymentId, { runSeq, reason });
      this.options.reporter.status(deploymentId, runSeq, "failed", { reason });
      return { ok: false, error: reason };
    }
  }

  private async removeOrphan(deploymentId: string): Promise<void> {
    if (this.latest.has(deploymentId)) return; // a command for it arrived meanwhile
    const containers = await this.containersOf(deploymentId);
    this.options.logger.warn("Removing containers of a deployment the control plane no longer lists", { deploymentId, containers: containers.length });
    try {
      await this.stopContainers(deploymentId, containers);
      for (const container of containers) await this.options.runtime.remove(container.id);
    } catch (error) {
      this.options.logger.error("Could not remove an orphaned deployment", { deploymentId, error: dockerMessage(error) });
    }
  }

  /** Stops the running ones gracefully, marked as deliberate so their exit is not reported as a crash. */
  private async stopContainers(deploymentId: string, containers: ContainerState[]): Promise<void> {
    for (const container of containers.filter((c) => c.running)) {
      this.deliberate.add(container.id);
      try {
        await this.options.runtime.stop(container.id, this.options.containerStopTimeoutS);
      } catch (error) {
        // Not stopped after all: when it ends, that is news again.
        this.deliberate.delete(container.id);
        throw error;
      }
      if (this.runningNow.get(deploymentId)?.id === container.id) this.runningNow.delete(deploymentId);
    }
    if (containers.length > 0) await this.options.logs.finish(deploymentId, LOG_DRAIN_MS);
  }

  /**
   * Sends the newest run's log to its end (after the spec's cursor) and waits
   * for it to be stored: lines written while the agent was away would otherwise
   * go with the container. False when the connection dropped first: the
   * container must stay until the next sync ships the rest. A control plane that
   * takes nothing for FINAL_LOG_DRAIN_MS does not hold the deployment up.
   */
  private async shipRemainingLogs(spec: DeploymentSpec, containers: ContainerState[]): Promise<boolean> {
    const newest = containers[0];
    if (!newest || newest.startedAt === null || runSeqOf(newest) > spec.runSeq) return true;
    if (!this.options.canShipLogs()) return false;
    this.options.logs.ensure(spec.deploymentId, newest, spec.logCursor, true);
    return (await this.options.logs.finish(spec.deploymentId, FINAL_LOG_DRAIN_MS)) !== "stopped";
  }

  private track(container: ContainerState): void {
    this.runningNow.set(container.deploymentId, container);
    this.watcher.watch(container.id, (exit) => void this.onExit(container, exit));
  }

  private async onExit(container: ContainerState, exit: ContainerExit): Promise<void> {
    const { deploymentId, id } = container;
    if (this.runningNow.get(deploymentId)?.id === id) this.runningNow.delete(deploymentId);
    if (this.deliberate.delete(id)) return;
    // When it ended, not when its last lines were shipped: the control plane bills up to this.
    const endedAtMs = this.options.clock.now();
    await this.options.logs.finish(deploymentId, LOG_DRAIN_MS);
    this.options.logger.info("A deployment's container ended by itself", { deploymentId, containerId: id, exitCode: exit.exitCode });
    this.options.reporter.status(deploymentId, runSeqOf(container), "exited", { exitCode: exit.exitCode, reason: describeExit(exit), at: endedAtMs });
  }

  private shipLogs(spec: DeploymentSpec, container: ContainerState, ended = false): void {
    if (this.options.canShipLogs()) this.options.logs.ensure(spec.deploymentId, container, spec.logCursor, ended);
  }

  /** The deployment's containers, newest run first. */
  private async containersOf(deploymentId: string): Promise<ContainerState[]> {
    const containers = await this.options.runtime.listManaged({ ...this.options.containerLabels, [LABEL_DEPLOYMENT_ID]: deploymentId });
    return containers.sort((a, b) => runSeqOf(b) - runSeqOf(a));
  }
}
