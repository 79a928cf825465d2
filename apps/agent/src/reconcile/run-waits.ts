// What a deployment's convergence waits on: before its next run's container
// starts, a restart's backoff and its image pull; after a lost node came back,
// the time its ended deployment's stopped container is kept. A newer desired state (a stop, a
// delete, another run) ends either at once, so a stop never waits behind a
// backoff or a pull that no longer matters; the same run sent again (a sync
// after a reconnect) waits only what is left of its backoff and lets its pull
// go on. The one owner of these waits, per reconciler.
import type { DeploymentSpec } from "@cm/protocol";
import type { Clock } from "../clock";
import type { Logger } from "../logger";

export class RunWaits {
  /** Each deployment's wait under way: told of every newer desired state, it ends itself when that makes it pointless. */
  private readonly waiting = new Map<string, (next: DeploymentSpec) => void>();
  /** When each waiting restart is due, so the same run sent again waits only what is left. */
  private readonly restartDue = new Map<string, { runSeq: number; atMs: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** A newer desired state came for the deployment. */
  newer(spec: DeploymentSpec): void {
    this.waiting.get(spec.deploymentId)?.(spec);
  }

  /** The deployment is removed: nothing of it is due any more. */
  forget(deploymentId: string): void {
    this.restartDue.delete(deploymentId);
  }

  /** A restart's wait: true once waited and `spec` is still wanted, false when a newer desired state came first. */
  backOff(spec: DeploymentSpec, delayMs: number, stillWanted: () => boolean): Promise<boolean> {
    const { deploymentId, runSeq } = spec;
    const nowMs = this.clock.now();
    const due = this.restartDue.get(deploymentId);
    const atMs = due?.runSeq === runSeq ? Math.min(due.atMs, nowMs + delayMs) : nowMs + delayMs;
    this.restartDue.set(deploymentId, { runSeq, atMs });
    this.logger.info("Waiting before restarting a deployment", { deploymentId, runSeq, delayMs: atMs - nowMs });
    return new Promise((resolve) => {
      const done = (waited: boolean) => {
        this.clock.clearTimeout(timer);
        if (this.waiting.get(deploymentId) === cancel) this.waiting.delete(deploymentId);
        if (waited) this.restartDue.delete(deploymentId);
        resolve(waited && stillWanted());
      };
      const cancel = () => done(false);
      const timer = this.clock.setTimeout(() => done(true), atMs - nowMs);
      this.waiting.set(deploymentId, cancel);
    });
  }

  /** Calls `converge` at `atMs` (a stopped container's removal), unless a newer desired state comes first. */
  later(spec: DeploymentSpec, atMs: number, converge: () => void): void {
    const { deploymentId } = spec;
    const cancel = () => {
      this.clock.clearTimeout(timer);
      if (this.waiting.get(deploymentId) === cancel) this.waiting.delete(deploymentId);
    };
    const timer = this.clock.setTimeout(
      () => {
        cancel();
        converge();
      },
      Math.max(0, atMs - this.clock.now()),
    );
    this.waiting.get(deploymentId)?.(spec);
    this.waiting.set(deploymentId, cancel);
  }

  /** Runs the start of `spec`'s run with a signal a newer run or state aborts (a pull under way ends with it). */
  async starting<T>(spec: DeploymentSpec, start: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const { deploymentId, runSeq } = spec;
    const interrupted = new AbortController();
    const interrupt = (next: DeploymentSpec) => {
      if (next.runSeq !== runSeq || next.desiredState !== "running") interrupted.abort();
    };
    this.waiting.set(deploymentId, interrupt);
    try {
      return await start(interrupted.signal);
    } finally {
      if (this.waiting.get(deploymentId) === interrupt) this.waiting.delete(deploymentId);
    }
  }
}
