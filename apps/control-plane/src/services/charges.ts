import { type DeploymentRow, MICRO_PER_CREDIT as MICRO, type Repos } from "@cm/db";
import type { IdGenerator } from "./ids";

/** The open transaction of repos.billing.locked, in which the deployment's row is locked and fresh. */
export type LockedDb = Parameters<Parameters<Repos["billing"]["locked"]>[1]>[0];

const MS_PER_HOUR = 3_600_000n;
const MICRO_PER_CREDIT = BigInt(MICRO);

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

/**
 * The platform's part of a charge: `feePercent` of it rounded down to the
 * micro-credit, so the operator's part (the charge less the fee) is never
 * rounded away and the two always add up to the charge exactly.
 */
export function feeMicro(chargeMicro: number, feePercent: number): number {
  return Math.floor((chargeMicro * feePercent) / 100);
}

const seconds = (ms: number) => (ms % 1000 === 0 ? String(ms / 1000) : (ms / 1000).toFixed(3));

/**
 * Charging a running deployment out of the credits held for it, inside the
 * caller's locked transaction: used by the meter every tick and by every move
 * that leaves running.
 */
export function createCharges({ repos, ids, feePercent }: { repos: Repos; ids: IdGenerator; feePercent: number }) {
  /** Holds up to `wantMicro` more from the user's available credits; whatever is there if not all of it. */
  async function topUp(db: LockedDb, dep: DeploymentRow, wantMicro: number): Promise<DeploymentRow> {
    const add = Math.min(wantMicro, await repos.billing.availableMicro(db, dep.userId));
    if (add <= 0) return dep;
    return (await repos.billing.holdMore(db, dep, add)) ?? dep;
  }

  /** Charges a running deployment for its time up to `untilMs`. */
  async function settle(db: LockedDb, dep: DeploymentRow, untilMs: number, nowMs: number): Promise<DeploymentRow> {
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
    const chargeMicro = Math.max(0, due);
    return repos.billing.consume(db, dep, {
      billedMs,
      billedUntil: untilMs,
      costMicro: chargeMicro,
      feeMicro: feeMicro(chargeMicro, feePercent),
      ids,
      txnId: ids("txn"),
      nowMs,
      description: `deployment ${dep.id}: ${seconds(billedMs - dep.billedMs)} s at ${rate} credits/h`,
    });
  }

  return { topUp, settle };
}
export type Charges = ReturnType<typeof createCharges>;
