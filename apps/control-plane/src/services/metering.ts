import { creditsToMicro, type Repos, type TransitionPatch } from "@cm/db";
import { KeyedQueue } from "@cm/protocol";
import { type Charges, costMicro } from "./charges";
import type { DeploymentMoves } from "./deployment-moves";
import type { NodeLink } from "./deployment-service";
import type { EventBus } from "./events";
import type { Clock } from "./ids";
import type { Logger } from "./logger";

const MINUTE_MS = 60_000;

export const OUT_OF_CREDITS = "stopped: your credits ran out";
/** Why a lost node's deployments ended, for the tenant: since when nothing was heard of it. */
export const NODE_LOST_PREFIX = "node lost:";
export const nodeLostReason = (lastSeenMs: number, lostAfterS: number) =>
  `${NODE_LOST_PREFIX} nothing heard from it since ${new Date(lastSeenMs).toISOString()}, more than ${lostAfterS} s; the deployment ended there and is no longer charged (should the node come back, its container is kept, stopped, for a while, unless you delete the deployment or start it again)`;
export const NODE_RETIRED = "node retired by its operator";

/** What the meter knows of the agents: whether a node is connected, and up to when it proved it is alive. */
export interface Liveness extends NodeLink {
  /** A connected node's last proof of life whose reports have all been handled; undefined without a session. */
  billableUntilMs(nodeId: string): number | undefined;
  /** Up to when a connected node's deployment that leaves running now is billed; undefined without a session. */
  settledThroughMs(nodeId: string, nowMs: number): number | undefined;
  /** The node's last proof of life known here, connected or not. */
  lastProofOfLifeMs(nodeId: string): number | undefined;
}

export type MeteringOptions = {
  repos: Repos;
  clock: Clock;
  events: EventBus;
  log: Logger;
  link: Liveness;
  charges: Charges;
  moves: DeploymentMoves;
  intervalMs: number;
};

/**
 * Per-second billing of running deployments. A deployment is charged from the
 * moment its agent reports it running: every `intervalMs` up to its node's last
 * heartbeat (time the node proved it was up, so a node that is later found lost
 * was never charged past it), and at the moment it leaves running (see
 * deployment-moves.ts). Charges come out of the hour of credits held for it;
 * each tick tops the hold back up to an hour, and stops the deployment when the
 * hold and the available credits no longer cover the next minute.
 */
export function createMetering(o: MeteringOptions) {
  const { repos, clock, events, log, link, charges, moves } = o;

  async function meterOne(id: string, untilMs: number, nowMs: number) {
    let charged = false;
    const stopped = await repos.billing.locked(id, async (db, dep) => {
      if (dep.status !== "running") return null;
      let d = await charges.settle(db, dep, untilMs, nowMs);
      charged = d.totalCostMicro !== dep.totalCostMicro;
      const hourMicro = creditsToMicro(d.hourlyRateCents);
      if (d.reservedMicro < hourMicro) d = await charges.topUp(db, d, hourMicro - d.reservedMicro);
      const nextMinuteMicro = costMicro(d.hourlyRateCents, d.billedMs + MINUTE_MS) - d.totalCostMicro;
      if (d.reservedMicro >= nextMinuteMicro) return null;
      const to = link.isConnected(d.nodeId) ? "stopping" : "stopped";
      return moves.moveLocked(db, d, to, { patch: { desiredState: "stopped", statusReason: OUT_OF_CREDITS }, nowMs, settleUntilMs: untilMs });
    });
    if (stopped) events.emit("deployment-changed", stopped);
    // Not deployment-changed: that one makes the agents' sessions and the caches look again, once per running deployment per tick.
    else if (charged) events.emit("deployment-touched", id);
  }

  /**
   * Deployments on nodes without a session here are skipped: they are caught up
   * by the first tick after their agent is back, or failed, charged no further,
   * when the node is declared lost.
   */
  async function runTick() {
    const nowMs = clock.now();
    for (const { id, nodeId } of await repos.deployments.runningIds()) {
      const seenMs = link.isConnected(nodeId) ? link.billableUntilMs(nodeId) : undefined;
      if (seenMs === undefined) continue;
      try {
        await meterOne(id, Math.min(seenMs, nowMs), nowMs);
      } catch (err) {
        log.error("metering: charge failed", { deploymentId: id, err });
      }
    }
  }

  // Ticks run one after another: one started while another runs waits for it.
  const ticks = new KeyedQueue();
  const tick = () => ticks.run("tick", runTick);

  /**
   * The node's connection is gone, or a new one begins: its running
   * deployments are charged up to `provenUntilMs` (the old connection's last
   * proof, when known) and then no further, until its agent reports each
   * running again: a gap nobody proved is never charged.
   */
  async function pauseNode(nodeId: string, provenUntilMs: number | undefined, nowMs: number) {
    for (const { id } of (await repos.deployments.liveOnNode(nodeId)).filter((d) => d.status === "running" && d.billedUntil !== null)) {
      await repos.billing.locked(id, async (db, dep) => {
        if (dep.status !== "running" || dep.billedUntil === null) return;
        const settled = provenUntilMs === undefined ? dep : await charges.settle(db, dep, Math.min(provenUntilMs, nowMs), nowMs);
        await repos.billing.pause(db, settled);
      });
    }
  }

  /** The node is gone: its live deployments fail (or finish stopping), charged up to its last sign of life. */
  async function nodeLost(nodeId: string, lastSeenMs: number, nowMs: number, reason: string) {
    // A deployment moved by someone else meanwhile is read again on the next pass.
    for (let pass = 0; ; pass++) {
      const live = await repos.deployments.liveOnNode(nodeId);
      if (live.length === 0) return;
      if (pass === 3) return log.warn("metering: deployments of a lost node kept changing", { nodeId });
      for (const dep of live) {
        const stopping = dep.status === "stopping";
        const patch: TransitionPatch = stopping ? { desiredState: "stopped" } : { desiredState: "stopped", statusReason: reason, exitCode: null };
        const moved = await moves.move(dep, stopping ? "stopped" : "failed", { patch, nowMs, settleUntilMs: lastSeenMs });
        if (moved.ok) events.emit("deployment-changed", moved.row);
      }
    }
  }

  let stopTimer: (() => void) | undefined;
  return {
    nodeLost,
    pauseNode,
    tick,
    start() {
      stopTimer ??= clock.every(o.intervalMs, () => void tick().catch((err) => log.error("metering: tick failed", { err })));
    },
    async stop() {
      stopTimer?.();
      stopTimer = undefined;
      await ticks.idle();
    },
  };
}
export type Metering = ReturnType<typeof createMetering>;
