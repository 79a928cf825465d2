import { creditsToMicro, type DeploymentRow, type Repos, type TransitionPatch } from "@cm/db";
import { isLive, type DeploymentStatus } from "@cm/protocol";
import type { NodeLink } from "./deployment-service";
import type { EventBus } from "./events";
import type { Clock, IdGenerator } from "./ids";
import type { Logger } from "./logger";

type Db = Parameters<Parameters<Repos["billing"]["locked"]>[1]>[0];

const MS_PER_HOUR = 3_600_000n;
const MICRO_PER_CREDIT = 1_000_000n;
const MINUTE_MS = 60_000;

export const OUT_OF_CREDITS = "stopped: your credits ran out";
export const NODE_LOST = "node went offline; the deployment was stopped and is no longer charged";

/**
 * What running `billedMs` milliseconds in total costs at `hourlyRateCents`
 * (1 credit = 1 cent), rounded down to the micro-credit. Charges are always the
 * difference between this and what was already charged, so however the time is
 * cut into ticks the total is the same as one charge for all of it.
 */
export function costMicro(hourlyRateCents: number, billedMs: number): number {
  return Number((BigInt(hourlyRateCents) * MICRO_PER_CREDIT * BigInt(billedMs)) / MS_PER_HOUR);
}

/** The most running time whose cumulative cost fits in `budgetMicro`. */
export function affordableMs(hourlyRateCents: number, budgetMicro: number): number {
  if (hourlyRateCents <= 0) return Number.MAX_SAFE_INTEGER;
  // cost(ms) <= budget  <=>  rate * 1e6 * ms < (budget + 1) * 3.6e6, because the cost is rounded down.
  return Number(((BigInt(budgetMicro) + 1n) * MS_PER_HOUR - 1n) / (BigInt(hourlyRateCents) * MICRO_PER_CREDIT));
}

const seconds = (ms: number) => (ms % 1000 === 0 ? String(ms / 1000) : (ms / 1000).toFixed(3));

/** What the meter knows of the agents: whether a node is connected, and up to when it proved it is alive. */
export interface Liveness extends NodeLink {
  /** A connected node's last proof of life whose reports have all been handled; undefined without a session. */
  billableUntilMs(nodeId: string): number | undefined;
  /** Up to when a connected node's deployment that leaves running now is billed; undefined without a session. */
  settledThroughMs(nodeId: string, nowMs: number): number | undefined;
  /** The node's last proof of life known here, connected or not. */
  lastProofOfLifeMs(nodeId: string): number | undefined;
}

export type MeteringOptions = { repos: Repos; clock: Clock; ids: IdGenerator; events: EventBus; log: Logger; link: Liveness; intervalMs: number };

/**
 * Per-second billing of running deployments. A deployment is charged from the
 * moment its agent reports it running: every `intervalMs` up to its node's last
 * heartbeat (time the node proved it was up, so a node that is later found lost
 * was never charged past it), and at the moment it leaves running. Charges come
 * out of the hour of credits held for it; each tick tops the hold back up to an
 * hour, and stops the deployment when the hold and the available credits no
 * longer cover the next minute.
 */
export function createMetering(o: MeteringOptions) {
  const { repos, clock, ids, events, log, link } = o;

  /** Holds up to `wantMicro` more from the user's available credits; whatever is there if not all of it. */
  async function topUp(db: Db, dep: DeploymentRow, wantMicro: number): Promise<DeploymentRow> {
    const add = Math.min(wantMicro, await repos.billing.availableMicro(db, dep.userId));
    if (add <= 0) return dep;
    return (await repos.billing.holdMore(db, dep, add)) ?? dep;
  }

  /** Charges a running deployment for its time up to `untilMs`, inside the caller's locked transaction. */
  async function settle(db: Db, dep: DeploymentRow, untilMs: number, nowMs: number): Promise<DeploymentRow> {
    if (dep.status !== "running" || dep.billedUntil === null || untilMs <= dep.billedUntil) return dep;
    const rate = dep.hourlyRateCents;
    let billedMs = dep.billedMs + (untilMs - dep.billedUntil);
    let due = costMicro(rate, billedMs) - dep.totalCostMicro;
    if (due > dep.reservedMicro) {
      // Only after a gap longer than the hold covers (the control plane was down):
      // hold what is available, and charge no more than that.
      dep = await topUp(db, dep, due - dep.reservedMicro);
      if (due > dep.reservedMicro) {
        billedMs = Math.max(dep.billedMs, affordableMs(rate, dep.totalCostMicro + dep.reservedMicro));
        due = costMicro(rate, billedMs) - dep.totalCostMicro;
      }
    }
    return repos.billing.consume(db, dep, {
      billedMs, billedUntil: untilMs, costMicro: Math.max(0, due), txnId: ids("txn"), nowMs,
      description: `deployment ${dep.id}: ${seconds(billedMs - dep.billedMs)} s at ${rate} credits/h`,
    });
  }

  /**
   * Moves a deployment from exactly the state it was read in, settling its
   * charges first when it leaves running: one transaction, so no second is
   * charged twice or lost. Null when someone else moved it first. Settled up to
   * `settleUntilMs` when given (the agent's own time of a stop), else up to now
   * while its agent is connected, else up to the node's last proof of life: a
   * container whose agent is away may have run until then, not provably after.
   */
  async function move(dep: DeploymentRow, to: DeploymentStatus, patch: TransitionPatch, nowMs: number, settleUntilMs?: number): Promise<DeploymentRow | null> {
    const untilMs = Math.min(nowMs, settleUntilMs ?? (dep.status === "running" ? await billableNow(dep.nodeId, nowMs) : nowMs));
    const row = await repos.billing.locked(dep.id, async (db, fresh) => {
      if (fresh.status !== dep.status || fresh.updatedAt !== dep.updatedAt) return null;
      return repos.deployments.transition(db, await settle(db, fresh, untilMs, nowMs), to, patch, nowMs);
    });
    return row ?? null;
  }

  async function billableNow(nodeId: string, nowMs: number): Promise<number> {
    const connected = link.isConnected(nodeId) ? link.settledThroughMs(nodeId, nowMs) : undefined;
    if (connected !== undefined) return connected;
    // Heartbeats another replica (or this one before a restart) wrote count too.
    const node = await repos.nodes.get(nodeId);
    return Math.max(link.lastProofOfLifeMs(nodeId) ?? 0, node?.lastHeartbeat ?? 0);
  }

  /** The tenant deleted it: settled and out of the live states at once; the agent removes the container. */
  function markDeleted(dep: DeploymentRow, nowMs: number) {
    const to = isLive(dep.status) ? "stopped" : dep.status;
    return move(dep, to, { desiredState: "removed", deletedAt: nowMs, statusReason: dep.statusReason ?? "deleted by the tenant" }, nowMs);
  }

  async function meterOne(id: string, untilMs: number, nowMs: number) {
    const stopped = await repos.billing.locked(id, async (db, dep) => {
      if (dep.status !== "running") return null;
      let d = await settle(db, dep, untilMs, nowMs);
      const hourMicro = creditsToMicro(d.hourlyRateCents);
      if (d.reservedMicro < hourMicro) d = await topUp(db, d, hourMicro - d.reservedMicro);
      const nextMinuteMicro = costMicro(d.hourlyRateCents, d.billedMs + MINUTE_MS) - d.totalCostMicro;
      if (d.reservedMicro >= nextMinuteMicro) return null;
      const to = link.isConnected(d.nodeId) ? "stopping" : "stopped";
      return repos.deployments.transition(db, d, to, { desiredState: "stopped", statusReason: OUT_OF_CREDITS }, nowMs);
    });
    if (stopped) events.emit("deployment-changed", stopped);
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
        log.error("metering: charge failed", { deploymentId: id, err: String(err) });
      }
    }
  }

  // Ticks run one after another: one started while another runs waits for it.
  let last: Promise<void> = Promise.resolve();
  const tick = () => (last = last.then(runTick, runTick));

  /** The node is gone: its live deployments fail (or finish stopping), charged up to its last sign of life. */
  async function nodeLost(nodeId: string, lastSeenMs: number, nowMs: number) {
    // A deployment moved by someone else meanwhile is read again on the next pass.
    for (let pass = 0; ; pass++) {
      const live = await repos.deployments.liveOnNode(nodeId);
      if (live.length === 0) return;
      if (pass === 3) return log.warn("metering: deployments of a lost node kept changing", { nodeId });
      for (const dep of live) {
        const stopping = dep.status === "stopping";
        const patch: TransitionPatch = stopping ? { desiredState: "stopped" } : { desiredState: "stopped", statusReason: NODE_LOST, exitCode: null };
        const moved = await move(dep, stopping ? "stopped" : "failed", patch, nowMs, lastSeenMs);
        if (moved) events.emit("deployment-changed", moved);
      }
    }
  }

  let timer: NodeJS.Timeout | undefined;
  return {
    move, markDeleted, nodeLost, tick,
    start() {
      timer ??= setInterval(() => void tick().catch((err) => log.error("metering: tick failed", { err: String(err) })), o.intervalMs);
      timer.unref();
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
      await last.catch(() => undefined);
    },
  };
}
export type Metering = ReturnType<typeof createMetering>;
