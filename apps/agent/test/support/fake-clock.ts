// A Clock that moves only when the test says. advance() runs each timer that
// falls due, in due order, at its own instant, and lets the promises it set
// going settle before the next one: a 10 s stop timeout or a minute of log
// polling takes microseconds, and what happens in between can be looked at.
import type { Clock, TimerHandle } from "../../src/clock";

interface Timer {
  dueMs: number;
  /** creation order: timers due at the same instant run in it, as Node's do */
  order: number;
  callback: () => void;
}

// Lets every promise chain that is ready settle (the engine double does no I/O: no chain waits on anything else).
const flushPromises = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export class FakeClock implements Clock {
  private readonly timers = new Set<Timer>();
  private created = 0;

  constructor(private nowMs = Date.UTC(2026, 0, 1, 12, 0, 0)) {}

  now = (): number => this.nowMs;

  setTimeout = (callback: () => void, delayMs: number): TimerHandle => {
    const timer: Timer = { dueMs: this.nowMs + Math.max(0, delayMs), order: this.created++, callback };
    this.timers.add(timer);
    return timer as unknown as TimerHandle;
  };

  clearTimeout = (handle: TimerHandle | undefined): void => {
    if (handle !== undefined) this.timers.delete(handle as unknown as Timer);
  };

  /** Moves time on by `ms`, running what falls due on the way. */
  async advance(ms: number): Promise<void> {
    const targetMs = this.nowMs + ms;
    await flushPromises();
    for (let next = this.nextDue(targetMs); next; next = this.nextDue(targetMs)) {
      this.timers.delete(next);
      this.nowMs = next.dueMs;
      next.callback();
      await flushPromises();
    }
    this.nowMs = targetMs;
  }

  /** Advances in `stepMs` steps until `check` holds; throws after `limitMs` of fake time. */
  async advanceUntil(check: () => boolean, what: string, limitMs = 120_000, stepMs = 100): Promise<void> {
    for (let spentMs = 0; !check(); spentMs += stepMs) {
      if (spentMs >= limitMs) throw new Error(`${what}: not after ${limitMs} ms of fake time`);
      await this.advance(stepMs);
    }
  }

  /** Timers set and not yet run: a test can tell that something waits on time. */
  get pendingTimers(): number {
    return this.timers.size;
  }

  private nextDue(targetMs: number): Timer | undefined {
    let next: Timer | undefined;
    for (const timer of this.timers) {
      if (timer.dueMs > targetMs) continue;
      if (!next || timer.dueMs < next.dueMs || (timer.dueMs === next.dueMs && timer.order < next.order)) next = timer;
    }
    return next;
  }
}
