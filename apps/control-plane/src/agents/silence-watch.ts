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
  /** With several replicas: whether another replica holds the node's agent session (replica-hop.ts). */
  heldElsewhere?: ((nodeId: string) => Promise<boolean>) | undefined;
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
        // Held by another replica: its heartbeats reach the database in that replica's
        // flushes, which fall behind in a connection surge (seen: 9,500 of 30,000 nodes
        // marked offline while heartbeating). The holder judges it on what it hears; this
        // replica only once the stored heartbeat is a whole window older still (the holder
        // died with it: the row outlives a SIGKILL).
        if (!s && (node.lastHeartbeat ?? 0) > cutoffMs - SILENT_INTERVALS * this.o.heartbeatIntervalMs && (await this.o.heldElsewhere?.(node.id))) return;
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

  /**
   * A node found offline (by another replica, on heartbeats this one had not flushed
   * yet) while its session here is live: the session closes, so the agent reconnects at
   * once and its hello and reports bring the node and its deployments back, the path
   * every reconnection takes, rather than leaving it offline while it heartbeats. A node
   * whose specs have not come yet is offline by design, and one retired is left to
   * retirement.
   */
  async offlineElsewhere(nodeId: string): Promise<void> {
    const { host } = this.o;
    const s = host.session(nodeId);
    if (!s?.ready) return;
    const node = await this.o.repos.nodes.get(nodeId);
    if (node?.status !== "offline" || node.retiredAt !== null || !(node.cpuCores > 0 && node.ramMb > 0)) return;
    await host.serialize(nodeId, async () => {
      const now = this.o.clock.now();
      if (host.session(nodeId) !== s || s.livenessMs(now) < now - SILENT_INTERVALS * this.o.heartbeatIntervalMs) return; // silent here too: check() judges it
      this.o.log.warn("agent: node marked offline elsewhere while its agent heartbeats here; reconnecting it", { nodeId });
      host.dropSession(nodeId, s);
      await this.o.contact.connectionEnded(nodeId, s.billableUntilMs);
    });
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
