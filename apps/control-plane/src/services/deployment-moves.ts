import {
  creditsToMicro,
  type DeploymentRow,
  type MoveFields,
  type NodeFree,
  type OccupyRefusal,
  OccupyRefused,
  type Repos,
  type TransitionPatch,
} from "@cm/db";
import type { DeploymentStatus } from "@cm/protocol";
import type { Charges, LockedDb } from "./charges";
import type { Liveness } from "./metering";

/** What a move settles besides the status it writes. */
export type Settles = {
  /** It enters the live states: a slot on its node with its GPUs, CPU and memory, and an hour of credits are taken, and a new run begins. */
  hold?: true;
  /** It leaves running: its running time is charged up to the move's settle time. */
  charge?: true;
  /** It leaves the live states: its slot and what is left of its hold are given back. */
  release?: true;
  /** A new run begins on the slot and hold it keeps: the restart policy starting an exited container again. */
  rerun?: true;
};

const NOTHING: Settles = {};
const HOLD: Settles = { hold: true };
const CHARGE: Settles = { charge: true };
const RELEASE: Settles = { release: true };
const CHARGE_AND_RELEASE: Settles = { charge: true, release: true };
const RESTART: Settles = { charge: true, rerun: true };

/**
 * Every move a deployment can make, and what each settles; a move missing here
 * is a bug in its caller. Charging starts with the move into running, whose
 * patch says from when (billedUntil). A status moves to itself only when a
 * deployment that holds nothing is deleted, or when a running one's agent is
 * back after its connection ended (charges resume).
 */
export const MOVES: { readonly [From in DeploymentStatus]: { readonly [To in DeploymentStatus]?: Settles } } = {
  pending: { pulling: NOTHING, starting: NOTHING, running: NOTHING, stopping: NOTHING, stopped: RELEASE, exited: RELEASE, failed: RELEASE },
  pulling: { starting: NOTHING, running: NOTHING, stopping: NOTHING, stopped: RELEASE, exited: RELEASE, failed: RELEASE },
  starting: { running: NOTHING, stopping: NOTHING, stopped: RELEASE, exited: RELEASE, failed: RELEASE },
  // running to itself: its agent is back and proves it runs; charges resume from the patch's billedUntil.
  running: { running: NOTHING, starting: RESTART, stopping: CHARGE, stopped: CHARGE_AND_RELEASE, exited: CHARGE_AND_RELEASE, failed: CHARGE_AND_RELEASE },
  stopping: { stopped: RELEASE, exited: RELEASE, failed: RELEASE },
  stopped: { starting: HOLD, stopped: NOTHING },
  exited: { starting: HOLD, exited: NOTHING },
  failed: { starting: HOLD, failed: NOTHING },
};

/** One hour on the node: what a live deployment holds, topped back up by the meter. */
export const hourOfCreditsMicro = (hourlyRateCents: number) => creditsToMicro(hourlyRateCents);

export type MoveOptions = {
  patch?: TransitionPatch;
  nowMs: number;
  /**
   * Where the charges of a deployment leaving running end: the agent's time of
   * its stop, a lost node's last sign of life. By default now while its agent is
   * connected, else its node's last proof of life: a container whose agent is
   * away may have run until then, not provably after.
   */
  settleUntilMs?: number;
};
/** CHANGED: the deployment is no longer as it was read (someone else moved it first). */
/** `free`: what the node had free when it refused to hold the deployment. */
export type MoveResult = { ok: true; row: DeploymentRow } | { ok: false; reason: "CHANGED" | OccupyRefusal; free?: NodeFree | undefined };

/** Thrown inside the transaction to roll it back; turned into a result outside it. */
class Changed extends Error {}

export type DeploymentMovesOptions = { repos: Repos; charges: Charges; link: Pick<Liveness, "isConnected" | "settledThroughMs" | "lastProofOfLifeMs"> };

/**
 * The one way a deployment changes status: the API's start, stop and delete, the
 * agents' reports, a lost node and the meter all move it here, each move with
 * what MOVES says it settles, in one transaction with the row locked, so no
 * second is charged twice or lost and no slot or credit is left held.
 */
export function createDeploymentMoves({ repos, charges, link }: DeploymentMovesOptions) {
  /** The move inside a locked transaction the caller holds, over the row as it reads it there. */
  async function moveLocked(db: LockedDb, dep: DeploymentRow, to: DeploymentStatus, o: MoveOptions & { settleUntilMs: number }): Promise<DeploymentRow> {
    const settles = MOVES[dep.status][to];
    if (!settles) throw new Error(`deployment ${dep.id}: there is no move from ${dep.status} to ${to}`);
    const { patch = {}, nowMs } = o;
    const d = settles.charge ? await charges.settle(db, dep, o.settleUntilMs, nowMs) : dep;
    const fields: MoveFields = { ...patch };
    if (settles.hold) {
      const holdMicro = hourOfCreditsMicro(d.hourlyRateCents);
      await repos.deployments.occupy(db, d, holdMicro);
      Object.assign(fields, { reservedMicro: holdMicro, runSeq: d.runSeq + 1 });
    }
    if (settles.rerun) fields.runSeq = d.runSeq + 1;
    if (settles.release) Object.assign(fields, { reservedMicro: 0, stoppedAt: patch.stoppedAt ?? nowMs });
    const row = await repos.deployments.moveRow(db, d, to, fields, nowMs);
    if (!row) throw new Changed();
    if (settles.release) await repos.deployments.vacate(db, d);
    return row;
  }

  /** Moves a deployment from exactly the state it was read in. */
  async function move(dep: DeploymentRow, to: DeploymentStatus, o: MoveOptions): Promise<MoveResult> {
    const { nowMs } = o;
    const settleUntilMs = Math.min(nowMs, o.settleUntilMs ?? (dep.status === "running" ? await billableNow(dep.nodeId, nowMs) : nowMs));
    try {
      const row = await repos.billing.locked(dep.id, (db, fresh) => {
        if (fresh.status !== dep.status || fresh.updatedAt !== dep.updatedAt) throw new Changed();
        return moveLocked(db, fresh, to, { ...o, settleUntilMs });
      });
      return row ? { ok: true, row } : { ok: false, reason: "CHANGED" };
    } catch (err) {
      if (err instanceof Changed) return { ok: false, reason: "CHANGED" };
      if (err instanceof OccupyRefused) return { ok: false, reason: err.reason, free: err.free };
      throw err;
    }
  }

  async function billableNow(nodeId: string, nowMs: number): Promise<number> {
    const connected = link.isConnected(nodeId) ? link.settledThroughMs(nodeId, nowMs) : undefined;
    if (connected !== undefined) return connected;
    // Heartbeats another replica (or this one before a restart) wrote count too.
    const node = await repos.nodes.get(nodeId);
    return Math.max(link.lastProofOfLifeMs(nodeId) ?? 0, node?.lastHeartbeat ?? 0);
  }

  return { move, moveLocked };
}
export type DeploymentMoves = ReturnType<typeof createDeploymentMoves>;
