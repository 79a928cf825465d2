// The catch-up for a wake-up that never came. With several replicas on one
// PostgreSQL, a command issued on replica B reaches the agent whose session is
// on replica A through a notice (services/replica-bus.ts); a notice is lost when
// A's listening connection was down at the time. The desired state is in the
// database all along, so A reads, on a timer, what was moved recently and tells
// its agents whatever they were not told: one query per replica per sweep,
// whatever the number of nodes it holds.
import type { DeploymentRow, Repos } from "@cm/db";
import type { Clock } from "../services/ids";
import type { Logger } from "../services/logger";
import { specKey } from "./desired-state";

/**
 * Moves younger than this are left to their notice, still on its way: a sweep
 * that read a row as a notice was delivering a newer one could send the older
 * state second.
 */
const SETTLE_MS = 2_000;
/** How far each sweep reaches back before the previous one's end: replicas' clocks stamp updatedAt, and they may differ by this much. */
const CLOCK_SKEW_MS = 30_000;

/** The part of a session the sweep speaks to. */
export interface SweptSession {
  readonly ready: boolean;
  /** What the agent was told of each deployment (specKey). */
  readonly known: ReadonlyMap<string, string>;
  onDeploymentChanged(dep: DeploymentRow): void;
}

export type CommandSweepOptions = {
  repos: Repos;
  clock: Clock;
  log: Logger;
  session: (nodeId: string) => SweptSession | undefined;
  /** Whether any session is held: a replica with none reads nothing. */
  holdsAny: () => boolean;
};

export class CommandSweep {
  private sweptToMs: number;
  /** Wake-ups the sweep made up for: each one a notice that was lost, or late past SETTLE_MS. */
  caught = 0;

  constructor(private readonly o: CommandSweepOptions) {
    this.sweptToMs = o.clock.now() - SETTLE_MS;
  }

  async sweep(): Promise<number> {
    const toMs = this.o.clock.now() - SETTLE_MS;
    const fromMs = Math.min(this.sweptToMs, toMs) - CLOCK_SKEW_MS;
    if (!this.o.holdsAny()) {
      this.sweptToMs = toMs;
      return 0;
    }
    let caught = 0;
    for (const row of await this.o.repos.deployments.movedBetween(fromMs, toMs)) {
      const s = this.o.session(row.nodeId);
      if (!s?.ready || s.known.get(row.id) === specKey(row)) continue;
      s.onDeploymentChanged(row);
      caught++;
    }
    this.sweptToMs = toMs;
    if (caught > 0) {
      this.caught += caught;
      this.o.log.info("replicas: the sweep told agents of changes whose wake-up did not come", { count: caught });
    }
    return caught;
  }
}
