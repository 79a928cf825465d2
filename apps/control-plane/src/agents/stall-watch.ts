import { performance } from "node:perf_hooks";

/**
 * Notices when this process itself did not run (SIGSTOP, a VM paused, an event
 * loop blocked): a timer meant to fire every `beatMs` that fires `thresholdMs`
 * late means nothing here ran meanwhile, so nobody here could have read a
 * heartbeat. Time is read from the monotonic clock, never the wall clock.
 */
export class StallWatch {
  private lastBeatMs: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly o: { beatMs: number; thresholdMs: number; onStall(stalledMs: number): void; now?: () => number }) {
    this.lastBeatMs = this.now();
  }

  /** Checks now (callers about to judge liveness check first); calls onStall once per stall. */
  check() {
    const nowMs = this.now();
    const gapMs = nowMs - this.lastBeatMs;
    this.lastBeatMs = nowMs;
    if (gapMs > this.o.thresholdMs) this.o.onStall(gapMs);
  }

  start() {
    this.lastBeatMs = this.now();
    this.timer ??= setInterval(() => this.check(), this.o.beatMs);
    this.timer.unref();
  }

  stop() {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private now() {
    return this.o.now ? this.o.now() : performance.now();
  }
}
