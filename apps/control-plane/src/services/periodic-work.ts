import type { Clock } from "./ids";

/** The periodic work a replica may run, as /metrics names it (cm_periodic_work_running{job}). */
export const PERIODIC_JOBS = [
  "metering",
  "offline-monitor",
  "heartbeat-flush",
  "command-sweep",
  "deposit-watcher",
  "payouts",
  "stream-fallback",
  "revocation-check",
] as const;
export type PeriodicJob = (typeof PERIODIC_JOBS)[number];

/**
 * Which periodic work this replica runs, and how many turns of each it took: every
 * job takes its period from a clock handed out here (clockFor), which is the
 * injected clock with its periods counted, so an operator sees from each replica's
 * /metrics what it runs and that it turns.
 */
export class PeriodicWork {
  private readonly jobs = new Map<PeriodicJob, { running: number; turns: number }>(PERIODIC_JOBS.map((j) => [j, { running: 0, turns: 0 }]));

  constructor(private readonly clock: Clock) {}

  /** The injected clock, its periods counted under `job`. */
  clockFor(job: PeriodicJob): Clock {
    const counts = this.jobs.get(job)!;
    return {
      now: () => this.clock.now(),
      every: (ms, fn) => {
        counts.running++;
        const stop = this.clock.every(ms, () => {
          counts.turns++;
          fn();
        });
        let stopped = false;
        return () => {
          if (stopped) return;
          stopped = true;
          counts.running--;
          stop();
        };
      },
    };
  }

  entries(): Array<{ job: PeriodicJob; running: boolean; turns: number }> {
    return [...this.jobs].map(([job, c]) => ({ job, running: c.running > 0, turns: c.turns }));
  }
}
