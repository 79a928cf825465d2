import { Histogram } from "prom-client";

/**
 * How long a change took from its move (updatedAt, stamped by whichever replica
 * moved it, just before its commit) to the command frame written to the agent
 * on the replica holding its session: a command issued here, or woken by another
 * replica's notice, or found by the sweep when the notice was lost. Replicas'
 * clocks differing shows in it (a negative span counts as 0).
 */
export class CommandWakes {
  readonly histogram = new Histogram({
    name: "cm_command_wake_seconds",
    help: "From a deployment's move (on any replica) to its command written to the agent on this replica",
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [],
  });

  delivered(movedAtMs: number, nowMs: number) {
    this.histogram.observe(Math.max(0, nowMs - movedAtMs) / 1000);
  }
}
