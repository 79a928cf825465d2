// Notices a half-open TCP connection (peer gone without a FIN, e.g. a NAT that
// forgot us): a ws ping every interval, and the socket is given up on when
// neither a pong nor any frame arrives within the timeout.
import type { Clock, TimerHandle } from "../clock";

export interface LivenessOptions {
  pingIntervalMs: number;
  pongTimeoutMs: number;
  clock: Clock;
  ping: () => void;
  onDead: () => void;
}

export class Liveness {
  private pingTimer: TimerHandle | undefined;
  private deadline: TimerHandle | undefined;
  private running = false;

  constructor(private readonly options: LivenessOptions) {}

  start(): void {
    this.running = true;
    this.schedulePing();
  }

  /** Any sign of life from the peer: a pong or a frame. */
  alive(): void {
    this.options.clock.clearTimeout(this.deadline);
    this.deadline = undefined;
  }

  stop(): void {
    this.running = false;
    this.options.clock.clearTimeout(this.pingTimer);
    this.options.clock.clearTimeout(this.deadline);
    this.pingTimer = this.deadline = undefined;
  }

  private schedulePing(): void {
    const { clock, pingIntervalMs, pongTimeoutMs } = this.options;
    this.pingTimer = clock.setTimeout(() => {
      if (!this.running) return;
      try {
        this.options.ping();
      } catch {
        // the socket is closing; its close event ends this loop
      }
      if (this.deadline === undefined) {
        this.deadline = clock.setTimeout(() => {
          if (this.running) this.options.onDead();
        }, pongTimeoutMs);
      }
      this.schedulePing();
    }, pingIntervalMs);
  }
}
