// What losing contact with a node means for its tenants. A silent node is not a
// lost node: an agent paused for 45 s, a network blip or this control plane's
// restart used to fail every deployment on the node and have the returning agent
// stop its containers. Now:
//   - the connection ends: each running deployment is charged up to the agent's
//     last proof of life and no further (a new connection begins the same way,
//     for a connection this process never saw end): charges resume from the
//     agent's next report of it running (status-reports.ts), so no gap without
//     a proof is ever charged;
//   - silent past the offline window: the node leaves placement and the
//     catalogue's online, and its deployments say they are unreachable; their
//     status, hold and containers stay as they are;
//   - silent past NODE_LOST_AFTER_S (300 s, as Kubernetes' unreachable
//     toleration): its deployments end, failed with the time it was last
//     heard of; a node retired by its operator ends them saying so.
// This module is the one place these are decided; the hub calls it.
import type { Repos } from "@cm/db";
import type { EventBus } from "../services/events";
import type { Clock } from "../services/ids";
import type { Logger } from "../services/logger";
import { type Metering, NODE_RETIRED, nodeLostReason } from "../services/metering";

export type NodeContactOptions = { repos: Repos; metering: Metering; events: EventBus; log: Logger; clock: Clock; lostAfterMs: number };

/** What the tenant reads while its node is unreachable. */
export const unreachableReason = (lastSeenMs: number, lostAfterMs: number) =>
  `node unreachable since ${new Date(lastSeenMs).toISOString()}: its container is left as it is and nothing is charged until the node is back; past ${Math.round(lostAfterMs / 1000)} s the deployment ends`;

export class NodeContact {
  constructor(private readonly o: NodeContactOptions) {}

  /** The node's connection ended: its running deployments are charged up to `provenUntilMs`, then paused. */
  async connectionEnded(nodeId: string, provenUntilMs: number): Promise<void> {
    await this.o.metering.pauseNode(nodeId, provenUntilMs, this.o.clock.now());
  }

  /**
   * A connection of the node's begins: whatever ran before it (under a
   * connection this process never saw end: it was restarted, or crashed) is
   * charged again only from the agent's report of it running.
   */
  async connectionBegins(nodeId: string): Promise<void> {
    await this.o.metering.pauseNode(nodeId, undefined, this.o.clock.now());
  }

  /** Silent past the offline window: out of placement and the catalogue's online; its deployments left alone, saying why. */
  async unreachable(nodeId: string, lastSeenMs: number, why: string): Promise<void> {
    await this.o.repos.nodes.markOffline(nodeId);
    this.o.events.emit("node-changed", nodeId);
    for (const id of await this.o.repos.deployments.noteOnNode(nodeId, unreachableReason(lastSeenMs, this.o.lostAfterMs)))
      this.o.events.emit("deployment-touched", id);
    this.o.log.warn(`node offline: ${why}; its deployments are left as they are until it is lost`, { nodeId });
  }

  /** Nodes whose silence has outlasted NODE_LOST_AFTER_S and that still have live deployments, with their last heartbeat. */
  overdue(): Promise<Array<{ nodeId: string; lastHeartbeat: number }>> {
    return this.o.repos.deployments.silentNodesWithLive(this.o.clock.now() - this.o.lostAfterMs);
  }

  /** Silent past NODE_LOST_AFTER_S: its deployments end, charged up to `lastSeenMs` at most. */
  async lost(nodeId: string, lastSeenMs: number): Promise<void> {
    await this.end(nodeId, lastSeenMs, nodeLostReason(lastSeenMs, Math.round(this.o.lostAfterMs / 1000)));
    this.o.log.warn("node lost: its deployments ended", { nodeId, lastSeenMs });
  }

  /** Retired by its operator: offline, and its deployments end saying so. */
  async retired(nodeId: string, lastSeenMs: number): Promise<void> {
    await this.o.repos.nodes.markOffline(nodeId);
    this.o.events.emit("node-changed", nodeId);
    await this.end(nodeId, lastSeenMs, NODE_RETIRED);
  }

  private async end(nodeId: string, lastSeenMs: number, reason: string) {
    await this.o.metering.nodeLost(nodeId, lastSeenMs, this.o.clock.now(), reason);
    this.o.events.emit("node-changed", nodeId);
  }
}
