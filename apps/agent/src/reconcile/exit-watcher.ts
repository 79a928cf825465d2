// Notices containers that end by themselves. One `docker wait` per running
// container; when the wait itself breaks (Docker restarted), the container is
// inspected again after a pause and watched anew or reported.
import type { Clock } from "../clock";
import type { Logger } from "../logger";
import type { ContainerClient } from "../runtime/container-runtime";
import { ContainerNotFoundError } from "../runtime/errors";
import type { ContainerExit } from "../runtime/types";

export const REWATCH_DELAY_MS = 5_000;

export class ExitWatcher {
  private readonly watched = new Set<string>();
  private stopped = false;

  constructor(
    private readonly runtime: Pick<ContainerClient, "waitExit" | "inspect">,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** Calls onExit once, when container `id` is no longer running. Watching twice is a no-op. */
  watch(id: string, onExit: (exit: ContainerExit) => void): void {
    if (this.watched.has(id) || this.stopped) return;
    this.watched.add(id);
    this.runtime.waitExit(id).then(
      (exit) => this.settle(id, exit, onExit),
      (error: unknown) => {
        if (error instanceof ContainerNotFoundError) {
          return this.settle(id, { id, exitCode: -1, oomKilled: false, error: "the container was removed outside of the agent" }, onExit);
        }
        this.logger.warn("Lost track of a container; looking again shortly", { containerId: id, error });
        this.clock.setTimeout(() => void this.recheck(id, onExit), REWATCH_DELAY_MS);
      },
    );
  }

  /** No more callbacks: the agent is shutting down and leaves the containers be. */
  stop(): void {
    this.stopped = true;
    this.watched.clear();
  }

  private async recheck(id: string, onExit: (exit: ContainerExit) => void): Promise<void> {
    if (this.stopped || !this.watched.delete(id)) return;
    try {
      const state = await this.runtime.inspect(id);
      if (state.running) return this.watch(id, onExit);
      this.watched.add(id);
      this.settle(id, { id, exitCode: state.exitCode ?? -1, oomKilled: state.oomKilled, error: state.error }, onExit);
    } catch (error) {
      this.watched.add(id);
      if (error instanceof ContainerNotFoundError) {
        return this.settle(id, { id, exitCode: -1, oomKilled: false, error: "the container was removed outside of the agent" }, onExit);
      }
      this.clock.setTimeout(() => void this.recheck(id, onExit), REWATCH_DELAY_MS);
    }
  }

  private settle(id: string, exit: ContainerExit, onExit: (exit: ContainerExit) => void): void {
    if (this.stopped || !this.watched.delete(id)) return;
    onExit(exit);
  }
}
