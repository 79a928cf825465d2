// Which nodes have gone silent, judged per node on what this process could have
// read: the heartbeat rule (three intervals without a frame: offline) and the
// lost rule (NODE_LOST_AFTER_S), with the grace a process owes the nodes it has
// not heard from since it started or resumed from a stall of its own. What
// silence means for a node's tenants is node-contact.ts's; this module decides
// when it applies.
import type { Repos } from "@cm/db";
import { AGENT_RECONNECT_MAX_MS } from "@cm/protocol";
import type { Clock } from "../services/ids";
import type { Logger } from "../services/logger";
import type { AgentSession } from "./agent-session";
import type { HeartbeatBatch } from "./heartbeat-batch";
import type { NodeContact } from "./node-contact";
import { StallWatch } from "./stall-watch";

/** Heartbeat intervals a node may stay silent before it is offline; also the most of one gap that counts as its uptime. */
export const SILENT_INTERVALS = 3;

/** What the watch needs of the hub: its sessions, each node's turn, and the node's last proof of life. */
export interface SilenceHost {
  session(nodeId: string): AgentSession | undefined;
  /** Drops the node's session (it stays open without heartbeats: half-dead). */
  dropSession(nodeId: string, s: AgentSession): void;
  serialize<T>(nodeId: string, fn: () => Promise<T>): Promise<T>;
  lastAliveMs(nodeId: string, s: AgentSession | undefined, lastHeartbeat: number | null | undefined): number;
}

export type SilenceWatchOptions = {
  repos: Repos;
  clock: Clock;
  log: Logger;
  heartbeats: HeartbeatBatch;
  contact: NodeContact;
  host: SilenceHost;
  heartbeatIntervalMs: number;
  nodeLostAfterMs: number;
};

export class SilenceWatch {
  /**
   * Liveness is judged only on what this process could have read: a node not
   * heard from since its start, or since it resumed after a stall of its own,
   * gets three whole intervals, plus the longest an agent waits between
   * reconnection attempts, before it can be found silent (its agent may have
   * been backing off while this process was away). A node heard from since
   * (here, or by another replica: its stored heartbeat) gets no such grace:
   * an agent that connected after a restart and then died is found silent
   * after the usual window, not offered to tenants for half a minute more.
   */
  private watchingSinceMs: number;
  private stall: StallWatch | undefined;

  constructor(private readonly o: SilenceWatchOptions) {
    this.watchingSinceMs = o.clock.now();
  }

  /** Watches this process's own stalls (a timer of its own). */
  start() {
    const interval = this.o.heartbeatIntervalMs;
    this.stall = new StallWatch({
      beatMs: Math.min(250, interval / 4),
      thresholdMs: interval,
      onStall: (stalledMs) => {
        this.watchingSinceMs = this.o.clock.now();
        this.o.log.warn("agent: this control plane did not run for a while; every node's liveness window starts again", { stalledMs: Math.round(stalledMs) });
      },
    });
    this.stall.start();
  }

  stop() {
    this.stall?.stop();
  }

  /** One check: silent nodes offline, then those silent past NODE_LOST_AFTER_S lost. */
  async check(): Promise<void> {
    // A stall of this process first: the heartbeats it did not read were not missed by the agents.
    this.stall?.check();
    await this.o.heartbeats.flush();
    const { host, contact } = this.o;
    const cutoffMs = this.o.clock.now() - SILENT_INTERVALS * this.o.heartbeatIntervalMs - 1;
    for (const node of await this.o.repos.nodes.staleOnline(cutoffMs)) {
      await host.serialize(node.id, async () => {
        this.stall?.check();
        const s = host.session(node.id);
        if (s && s.livenessMs(this.o.clock.now()) > cutoffMs) return; // a frame arrived since the flush, or the socket is not being read
        if (this.inGrace(host.lastAliveMs(node.id, s, node.lastHeartbeat), cutoffMs)) return;
        if (s) {
          // A socket that stays open without heartbeats is half-dead: drop it, the agent reconnects.
          host.dropSession(node.id, s);
          await contact.connectionEnded(node.id, s.billableUntilMs);
        }
        await contact.unreachable(node.id, host.lastAliveMs(node.id, s, node.lastHeartbeat), "it missed three heartbeats");
      });
    }
    await this.loseOverdue();
  }

  /** Nodes silent past NODE_LOST_AFTER_S, counted from when this process could first hear them. */
  private async loseOverdue() {
    const { host } = this.o;
    for (const { nodeId, lastHeartbeat } of await this.o.contact.overdue()) {
      await host.serialize(nodeId, async () => {
        if (host.session(nodeId)) return; // back meanwhile
        const lastSeenMs = host.lastAliveMs(nodeId, undefined, lastHeartbeat);
        if (this.o.clock.now() - Math.max(lastSeenMs, this.watchingSinceMs) <= this.o.nodeLostAfterMs) return;
        await this.o.contact.lost(nodeId, lastSeenMs);
      });
    }
  }

  /** Whether a node last alive at `lastAliveMs` is still owed the grace of this process's start (see watchingSinceMs). */
  private inGrace(lastAliveMs: number, cutoffMs: number): boolean {
    return lastAliveMs < this.watchingSinceMs && this.watchingSinceMs + AGENT_RECONNECT_MAX_MS > cutoffMs;
  }
}
