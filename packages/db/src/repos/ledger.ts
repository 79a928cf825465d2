import { and, count, desc, eq, gte, sql, sum } from "drizzle-orm";
import type { Db, DbHandle } from "../client";
import type { CreditTransactionRow, UserRow } from "../types";

export type LedgerType = CreditTransactionRow["type"];
export type LedgerEntry = {
  id: string;
  userId: string;
  type: LedgerType;
  amountMicro: number;
  description: string;
  createdAt: number;
  txSignature?: string | null;
  deploymentId?: string | null;
  depositId?: string | null;
};
export type LedgerTotals = {
  /** Every deposit row: credited deposits and admin grants. */
  depositsMicro: number;
  /** Deposit rows no deposit paid for (the admin command's credits). */
  grantsMicro: number;
  usageMicro: number;
  refundsMicro: number;
  /** Every user's running balance, added up. */
  balancesMicro: number;
  /** What the deposits table says confirmed deposits credited. */
  creditedDepositsMicro: number;
};
export type BalanceMicro = { availableMicro: number; reservedMicro: number; totalUsedMicro: number; balanceMicro: number };

export const toBalance = (u: Pick<UserRow, "balanceMicro" | "reservedMicro" | "totalUsedMicro">): BalanceMicro => ({
  balanceMicro: u.balanceMicro,
  availableMicro: u.balanceMicro - u.reservedMicro,
  reservedMicro: u.reservedMicro,
  totalUsedMicro: u.totalUsedMicro,
});

/**
 * The ledger's writes. Each takes the transaction's db: a balance change and its
 * ledger row are always written together, and the running balance on the user row
 * is updated in the same statement that numbers the row, so reading a balance
 * never needs to add up the rows (the tests check that it equals the sum).
 */
export function ledgerOps(h: DbHandle) {
  const { users, creditTransactions } = h.t;
  return {
    async post(db: Db, e: LedgerEntry): Promise<CreditTransactionRow> {
      // Usage rows are negative and refunds give usage back, so both move totalUsed by -amount.
      const usedDelta = e.type === "deposit" ? 0 : -e.amountMicro;
      const [u] = await db
        .update(users)
        .set({
          balanceMicro: sql`${users.balanceMicro} + ${e.amountMicro}`,
          totalUsedMicro: sql`${users.totalUsedMicro} + ${usedDelta}`,
          ledgerSeq: sql`${users.ledgerSeq} + 1`,
        })
        .where(eq(users.id, e.userId))
        .returning({ balanceMicro: users.balanceMicro, ledgerSeq: users.ledgerSeq });
      if (!u) throw new Error(`ledger: no user ${e.userId}`);
      const [row] = await db
        .insert(creditTransactions)
        .values({
          id: e.id,
          userId: e.userId,
          type: e.type,
          amountMicro: e.amountMicro,
          balanceAfterMicro: u.balanceMicro,
          description: e.description,
          txSignature: e.txSignature ?? null,
          deploymentId: e.deploymentId ?? null,
          depositId: e.depositId ?? null,
          createdAt: e.createdAt,
          seq: u.ledgerSeq,
        })
        .returning();
      return row!;
    },

    /** Holds credits if the available balance covers them; false otherwise. Never a read-then-write. */
    async reserve(db: Db, userId: string, amountMicro: number): Promise<boolean> {
      const done = await db
        .update(users)
        .set({ reservedMicro: sql`${users.reservedMicro} + ${amountMicro}` })
        .where(and(eq(users.id, userId), gte(sql`${users.balanceMicro} - ${users.reservedMicro}`, amountMicro)))
        .returning({ id: users.id });
      return done.length === 1;
    },

    async release(db: Db, userId: string, amountMicro: number) {
      if (amountMicro <= 0) return;
      await db
        .update(users)
        .set({ reservedMicro: sql`case when ${users.reservedMicro} < ${amountMicro} then 0 else ${users.reservedMicro} - ${amountMicro} end` })
        .where(eq(users.id, userId));
    },
  };
}

export function createLedgerRepo(h: DbHandle) {
  const { users, creditTransactions } = h.t;
  const ops = ledgerOps(h);
  return {
    ...ops,
    async balance(userId: string): Promise<BalanceMicro> {
      return h.run(async (db) => {
        const [u] = await db.select().from(users).where(eq(users.id, userId));
        if (!u) throw new Error(`ledger: no user ${userId}`);
        return toBalance(u);
      });
    },
    async list(userId: string, type: LedgerType | undefined, page: number, limit: number) {
      return h.run(async (db) => {
        const w = and(eq(creditTransactions.userId, userId), type ? eq(creditTransactions.type, type) : undefined);
        const rows = await db
          .select()
          .from(creditTransactions)
          .where(w)
          .orderBy(desc(creditTransactions.seq))
          .limit(limit)
          .offset((page - 1) * limit);
        const [c] = await db.select({ n: count() }).from(creditTransactions).where(w);
        return { rows, total: Number(c?.n ?? 0) };
      });
    },
    /**
     * The whole ledger added up, for audits and tests: what entered tenants' balances
     * (deposit rows: credited deposits and admin grants), what usage took, what refunds
     * gave back, what the balances hold, and what the deposits table says it credited.
     * All in micro-credits, usage and refunds as positive amounts.
     */
    async totals(): Promise<LedgerTotals> {
      const { deposits } = h.t;
      return h.run(async (db) => {
        const [rows] = await db
          .select({
            deposits: sql<string>`coalesce(sum(case when ${creditTransactions.type} = 'deposit' then ${creditTransactions.amountMicro} else 0 end), 0)`,
            grants: sql<string>`coalesce(sum(case when ${creditTransactions.type} = 'deposit' and ${creditTransactions.depositId} is null then ${creditTransactions.amountMicro} else 0 end), 0)`,
            usage: sql<string>`coalesce(sum(case when ${creditTransactions.type} = 'usage' then -${creditTransactions.amountMicro} else 0 end), 0)`,
            refunds: sql<string>`coalesce(sum(case when ${creditTransactions.type} = 'refund' then ${creditTransactions.amountMicro} else 0 end), 0)`,
          })
          .from(creditTransactions);
        const [balances] = await db.select({ s: sum(users.balanceMicro) }).from(users);
        const [credited] = await db
          .select({ s: sum(deposits.creditsMicro) })
          .from(deposits)
          .where(eq(deposits.status, "confirmed"));
        return {
          depositsMicro: Number(rows?.deposits ?? 0),
          grantsMicro: Number(rows?.grants ?? 0),
          usageMicro: Number(rows?.usage ?? 0),
          refundsMicro: Number(rows?.refunds ?? 0),
          balancesMicro: Number(balances?.s ?? 0),
          creditedDepositsMicro: Number(credited?.s ?? 0),
        };
      });
    },
    /** The slow way, for audits and tests: the sum of every ledger row. */
    async sumOfRows(userId: string): Promise<number> {
      return h.run(async (db) => {
        const [r] = await db
          .select({ s: sum(creditTransactions.amountMicro) })
          .from(creditTransactions)
          .where(eq(creditTransactions.userId, userId));
        return Number(r?.s ?? 0);
      });
    },
  };
}
export type LedgerRepo = ReturnType<typeof createLedgerRepo>;
