import { type Repos, UPTIME_HOUR_MS } from "@cm/db";
import { KeyedQueue } from "@cm/protocol";
import type { Logger } from "../services/logger";

/**
 * Heartbeats' lastHeartbeat writes, gathered and flushed once a second in one
 * statement: 10,000 agents every 10 s would otherwise be 1,000 UPDATEs a
 * second. Going online or offline is never batched; only the timestamp of a
 * node that is already online waits, and the monitor flushes before it judges.
 */
export class HeartbeatBatch {
  private pending = new Map<string, number>();
  /** The clock hour of the last prune of old uptime hours: at most one a clock hour. */
  private prunedHour = -1;
  private readonly flushes = new KeyedQueue();

  /** `maxGapMs`: the most of a silence between two heartbeats that counts as uptime (the time after which a silent node is offline). */
  constructor(
    private readonly repos: Repos,
    private readonly log: Logger,
    private readonly maxGapMs: number,
  ) {}

  note(nodeId: string, atMs: number) {
    this.pending.set(nodeId, atMs);
  }

  /** Writes everything noted so far; flushes never overlap. */
  flush(): Promise<void> {
    return this.flushes.run("flush", async () => {
      if (this.pending.size === 0) return;
      const beats = [...this.pending];
      this.pending = new Map();
      try {
        await this.repos.nodes.recordHeartbeats(beats, this.maxGapMs);
      } catch (err) {
        // Kept for the next flush (unless a newer beat came): a database outage must not erase proof of life.
        for (const [nodeId, atMs] of beats) if (!this.pending.has(nodeId)) this.pending.set(nodeId, atMs);
        this.log.error("heartbeats: flush failed", { nodes: beats.length, err });
        return;
      }
      await this.prune(beats.reduce((m, [, atMs]) => Math.max(m, atMs), 0));
    });
  }

  /** Old uptime hours go once a clock hour (of the heartbeats' clock); a failed prune is tried again the next hour. */
  private async prune(nowMs: number) {
    const hour = Math.floor(nowMs / UPTIME_HOUR_MS);
    if (hour <= this.prunedHour) return;
    this.prunedHour = hour;
    try {
      await this.repos.nodes.pruneUptime(nowMs);
    } catch (err) {
      this.log.error("heartbeats: pruning old uptime hours failed", { err });
    }
  }
}
