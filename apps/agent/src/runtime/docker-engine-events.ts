// Notices the Docker engine coming back after it went away (a restart, an
// upgrade). dockerd rewrites its iptables chains as it starts, so rules the
// agent keeps beside them (egress/) are checked at once rather than on the next
// interval. Docker's event stream, filtered to daemon events so it stays quiet,
// is held open: it ends when dockerd stops, and the first time it opens again
// is the engine back, its chains already rewritten (dockerd serves its API only
// once its networks are set up).
//
// The same stream carries containers' ends (die, destroy) and nothing else of
// theirs, for the network sandbox pool: a tenant's container killed or removed
// out of band leaves its sandbox, and the bridge network it holds, behind until
// someone looks (sandboxes.ts). A few events per deployment, not per request.
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

/** A container that stopped running (`die`) or no longer exists (`destroy`), with its labels. */
export interface ContainerEnd {
  id: string;
  action: "die" | "destroy";
  labels: Record<string, string>;
}

/** What the sandbox pool listens to: containers' ends, and the engine's comebacks (whatever ended meanwhile was never told). */
export interface ContainerEnds extends EngineRestarts {
  onContainerEnd(listener: (end: ContainerEnd) => void): () => void;
}

/** Only these reach the agent: daemon events (none expected; its stream's end is the news) and containers' ends. */
export const ENGINE_EVENT_FILTERS: { type: Array<"daemon" | "container">; event: string[] } = { type: ["daemon", "container"], event: ["die", "destroy"] };

type EventStream = NodeJS.ReadableStream & { destroy(): void };

export class DockerEngineEvents implements ContainerEnds {
  private readonly listeners = new Set<() => void>();
  private readonly endListeners = new Set<(end: ContainerEnd) => void>();
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
    return this.listen(this.listeners, listener);
  }

  onContainerEnd(listener: (end: ContainerEnd) => void): () => void {
    return this.listen(this.endListeners, listener);
  }

  private listen<T>(set: Set<T>, listener: T): () => void {
    set.add(listener);
    void this.open();
    return () => {
      set.delete(listener);
      if (!this.listened()) this.close();
    };
  }

  private listened(): boolean {
    return this.listeners.size + this.endListeners.size > 0;
  }

  private async open(): Promise<void> {
    if (this.opening || this.stream) return;
    this.opening = true;
    let stream: EventStream;
    try {
      this.logger.debug("Opening Docker's event stream");
      stream = (await this.docker.getEvents({ filters: ENGINE_EVENT_FILTERS })) as EventStream;
    } catch (error) {
      this.opening = false;
      if (!this.lost) this.logger.warn("Docker does not answer; watching for it to come back", { error: (error as Error).message });
      this.lost = true;
      this.retry();
      return;
    }
    this.opening = false;
    if (!this.listened()) return stream.destroy();
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
    let buffered = "";
    stream.on("data", (chunk: Buffer | string) => {
      const lines = (buffered + chunk.toString()).split("\n");
      buffered = lines.pop() ?? "";
      for (const line of lines) this.dispatch(line);
    });
    if (!this.lost) return;
    this.lost = false;
    this.logger.warn("Docker answers again after it was gone");
    for (const listener of [...this.listeners]) listener();
  }

  /** One JSON event per line (Docker's /events); only containers' ends are news. */
  private dispatch(line: string): void {
    if (!line.trim()) return;
    let event: { Type?: string; Action?: string; Actor?: { ID?: string; Attributes?: Record<string, string> } };
    try {
      event = JSON.parse(line);
    } catch {
      this.logger.debug("Ignoring an event Docker sent that is not JSON", { line: line.slice(0, 200) });
      return;
    }
    if (event.Type !== "container" || (event.Action !== "die" && event.Action !== "destroy")) return;
    const end: ContainerEnd = { id: event.Actor?.ID ?? "", action: event.Action, labels: event.Actor?.Attributes ?? {} };
    for (const listener of [...this.endListeners]) listener(end);
  }

  private retry(): void {
    if (!this.listened()) return;
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
