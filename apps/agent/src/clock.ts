// Time as a dependency, so the connection's timers and the reports' timestamps
// can be driven by tests.
export type TimerHandle = { readonly __timer: unique symbol };

export interface Clock {
  now(): number;
  setTimeout(callback: () => void, delayMs: number): TimerHandle;
  clearTimeout(handle: TimerHandle | undefined): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (callback, delayMs) => {
    // Not unref'd: during backoff a timer is all that keeps the agent's process alive.
    return setTimeout(callback, delayMs) as unknown as TimerHandle;
  },
  clearTimeout: (handle) => {
    if (handle !== undefined) clearTimeout(handle as unknown as NodeJS.Timeout);
  },
};
