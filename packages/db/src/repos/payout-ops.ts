import { and, eq, isNull, sql } from "drizzle-orm";
import type { Db, DbHandle } from "../client";
import type { PayoutRow } from "../types";

/**
 * The payout writes that more than one repository makes, each inside the
 * caller's transaction: an administrator's rejection (repos.payouts) and a
 * refund taking back what a waiting payout held (repos.earnings).
 */
export function payoutOps(h: DbHandle) {
  const { payouts: p, users } = h.t;
  return {
    /**
     * Locks a user's row (a no-op write; SQLite's BEGIN IMMEDIATE already
     * serialises). A payout request, a refund and a payout's failure each lock
     * the operator's row before any payout row, so each sees what the others
     * left and no two wait on each other.
     */
    async lockUser(db: Db, userId: string) {
      await db
        .update(users)
        .set({ ledgerSeq: sql`${users.ledgerSeq}` })
        .where(eq(users.id, userId));
    },

    /**
     * Fails a payout nothing was signed for (requested, approved or not), by
     * compare-and-set: a sender that signs it afterwards finds it failed and
     * sends nothing. Answers it, or undefined when it is past requested.
     */
    async failUnsent(db: Db, id: string, error: string, nowMs: number): Promise<PayoutRow | undefined> {
      const [row] = await db
        .update(p)
        .set({ status: "failed", error, leaseOwner: null, leaseUntil: null, updatedAt: nowMs })
        .where(and(eq(p.id, id), eq(p.status, "requested"), isNull(p.signature)))
        .returning();
      return row;
    },
  };
}
