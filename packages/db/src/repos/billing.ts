import { eq, sql } from "drizzle-orm";
import type { Db, DbHandle } from "../client";
import type { DeploymentRow } from "../types";
import { createEarningsRepo, type NewId } from "./earnings";
import { ledgerOps } from "./ledger";

/** One charge, already computed by the metering: the repository only writes it. */
export type Consumption = {
  /** The deployment's new cumulative running time billed, and the instant it is billed up to. */
  billedMs: number;
  billedUntil: number;
  /** Taken from the deployment's hold; never more than the hold. */
  costMicro: number;
  txnId: string;
  description: string;
  nowMs: number;
  /** The platform's part of the cost; the node's operator earns the rest. */
  feeMicro: number;
  ids: NewId;
};

/**
 * The storage side of metering. Every function but `locked` takes the open
 * transaction of `locked`, in which the deployment's row is locked and freshly
 * read: a charge, its ledger row, the deployment's cost and both holds are
 * written together or not at all, and two replicas' meters never charge the
 * same seconds twice.
 */
export function createBillingRepo(h: DbHandle) {
  const { deployments, users } = h.t;
  const ledger = ledgerOps(h);
  const earnings = createEarningsRepo(h);

  return {
    /** fn in one transaction over the locked, fresh row; undefined when there is no such deployment. */
    async locked<T>(id: string, fn: (db: Db, dep: DeploymentRow) => Promise<T>): Promise<T | undefined> {
      return h.transaction(async (db) => {
        // A no-op write takes the row lock on PostgreSQL (SQLite's BEGIN IMMEDIATE
        // already serialises) and returns the latest committed version.
        const [dep] = await db
          .update(deployments)
          .set({ billedMs: sql`${deployments.billedMs}` })
          .where(eq(deployments.id, id))
          .returning();
        return dep ? fn(db, dep) : undefined;
      });
    },

    /**
     * No proof of life reaches the meter for it now (its node's connection is
     * gone): nothing more is charged until its agent reports it running again,
     * which says from when (billedUntil).
     */
    async pause(db: Db, dep: DeploymentRow): Promise<DeploymentRow> {
      const [row] = await db.update(deployments).set({ billedUntil: null }).where(eq(deployments.id, dep.id)).returning();
      return row!;
    },

    /** The user's credits not held for anything. */
    async availableMicro(db: Db, userId: string): Promise<number> {
      const [u] = await db.select({ b: users.balanceMicro, r: users.reservedMicro }).from(users).where(eq(users.id, userId));
      return u ? u.b - u.r : 0;
    },

    /** Moves credits from the user's available balance into the deployment's hold; null if they are not there. */
    async holdMore(db: Db, dep: DeploymentRow, amountMicro: number): Promise<DeploymentRow | null> {
      if (amountMicro <= 0) return dep;
      if (!(await ledger.reserve(db, dep.userId, amountMicro))) return null;
      const [row] = await db
        .update(deployments)
        .set({ reservedMicro: dep.reservedMicro + amountMicro })
        .where(eq(deployments.id, dep.id))
        .returning();
      return row!;
    },

    /**
     * Charges from the hold: the user's balance and reserved both drop by the
     * cost (so available is untouched), with one usage row on the ledger.
     */
    async consume(db: Db, dep: DeploymentRow, c: Consumption): Promise<DeploymentRow> {
      if (c.costMicro < 0 || c.costMicro > dep.reservedMicro)
        throw new Error(`billing: charge ${c.costMicro} outside the hold ${dep.reservedMicro} of ${dep.id}`);
      if (c.feeMicro < 0 || c.feeMicro > c.costMicro) throw new Error(`billing: fee ${c.feeMicro} outside the charge ${c.costMicro} of ${dep.id}`);
      const [row] = await db
        .update(deployments)
        .set({
          billedMs: c.billedMs,
          billedUntil: c.billedUntil,
          totalCostMicro: dep.totalCostMicro + c.costMicro,
          reservedMicro: dep.reservedMicro - c.costMicro,
        })
        .where(eq(deployments.id, dep.id))
        .returning();
      if (c.costMicro > 0) {
        await ledger.release(db, dep.userId, c.costMicro);
        await ledger.post(db, {
          id: c.txnId,
          userId: dep.userId,
          type: "usage",
          amountMicro: -c.costMicro,
          description: c.description,
          deploymentId: dep.id,
          createdAt: c.nowMs,
        });
        await earnings.credit(db, dep, { usageTxnId: c.txnId, earnMicro: c.costMicro - c.feeMicro, feeMicro: c.feeMicro, nowMs: c.nowMs, ids: c.ids });
      }
      return row!;
    },
  };
}
export type BillingRepo = ReturnType<typeof createBillingRepo>;
