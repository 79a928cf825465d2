// Notices the Docker engine coming back after it went away (a restart, an
// upgrade). dockerd rewrites its iptables chains as it starts, so rules the
// agent keeps beside them (egress/) are checked at once rather than on the next
// interval. Docker's event stream, filtered to daemon events so it stays quiet,
// is held open: it ends when dockerd stops, and the first time it opens again
// is the engine back, its chains already rewritten (dockerd serves its API only
// once its networks are set up).
import type Docker from "dockerode";
import type { Clock, TimerHandle } from "../clock";
import type { RuntimeLogger } from "./logger";

/** How often a lost engine is asked again whether it is back. */
export const ENGINE_RETRY_MS = 1_000;

/** The engine's restarts, as the egress guard needs them. DockerRuntime implements it; the ContainerRuntime contract does not include it. */
export interface EngineRestarts {
  /** Calls `listener` each time the engine answers again after it stopped answering; returns a function that stops calling it. */
  onEngineBack(listener: () => void): () => void;
}

type EventStream = NodeJS.ReadableStream & { destroy(): void };

export class DockerEngineEvents implements EngineRestarts {
  private readonly listeners = new Set<() => void>();
  private stream: EventStream | undefined;
  private timer: TimerHandle | undefined;
  /** the stream broke (or never opened): its next opening is the engine back */
  private lost = false;
  private opening = false;

  constructor(
    private readonly docker: Docker,
    private readonly logger: RuntimeLogger,
    private readonly clock: Clock,
    private readonly retryMs = ENGINE_RETRY_MS,
  ) {}

  onEngineBack(listener: () => void): () => void {
    this.listeners.add(listener);
    if (this.listeners.size === 1) void this.open();
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.close();
    };
  }

  private async open(): Promise<void> {
    if (this.opening || this.stream) return;
    this.opening = true;
    let stream: EventStream;
    try {
      this.logger.debug("Opening Docker's event stream");
      stream = (await this.docker.getEvents({ filters: { type: ["daemon"] } })) as EventStream;
    } catch (error) {
      this.opening = false;
      if (!this.lost) this.logger.warn("Docker does not answer; watching for it to come back", { error: (error as Error).message });
      this.lost = true;
      this.retry();
      return;
    }
    this.opening = false;
    if (this.listeners.size === 0) return stream.destroy();
    this.stream = stream;
    const broken = () => {
      if (this.stream !== stream) return;
      this.stream = undefined;
      this.lost = true;
      this.logger.warn("Docker's event stream ended (the engine stopping?); watching for it to come back");
      this.retry();
    };
    stream.once("end", broken);
    stream.once("close", broken);
    stream.once("error", broken);
    // Daemon events (a config reload) are not needed: only the stream's end is news.
    stream.resume();
    if (!this.lost) return;
    this.lost = false;
    this.logger.warn("Docker answers again after it was gone");
    for (const listener of [...this.listeners]) listener();
  }

  private retry(): void {
    if (this.listeners.size === 0) return;
    this.timer = this.clock.setTimeout(() => void this.open(), this.retryMs);
  }

  private close(): void {
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    const stream = this.stream;
    this.stream = undefined;
    stream?.destroy();
  }
}
