import { and, count, desc, eq, gt, gte, inArray, sql } from "drizzle-orm";
import type { Db, DbHandle } from "../client";
import type { DeploymentRow, EarningRow } from "../types";
import { ledgerOps } from "./ledger";

const DAY_MS = 86_400_000;

/** Makes a fresh id with a prefix (`ern_...`, `txn_...`). */
export type NewId = (prefix: string) => string;

/** A usage charge already split by the caller: what the node's operator earns and what the platform keeps. */
export type ChargeSplit = { usageTxnId: string; earnMicro: number; feeMicro: number; nowMs: number; ids: NewId };

export type Refund = { amountMicro: number; description: string; nowMs: number; ids: NewId };
export type RefundOutcome = { ok: true; transactionId: string; fromOperatorMicro: number; fromFeeMicro: number } | { ok: false; refundableMicro: number };

export type EarningsSummaryMicro = {
  pendingMicro: number;
  availableMicro: number;
  byNode: { nodeId: string; usageMicro: number; feeMicro: number; refundedMicro: number; earnedMicro: number }[];
  byDay: { dayStartMs: number; usageMicro: number; feeMicro: number; refundedMicro: number; earnedMicro: number }[];
};

/** Ledger-wide sums, for audits and the tests' invariants. */
export type EarningsBooks = { usageMicro: number; refundsMicro: number; operatorMicro: number; platformMicro: number };

/**
 * The operators' earnings ledger: append-only rows in integer micro-credits,
 * each pointing at the tenant's ledger row it comes from, written in the
 * transaction of that row. Payouts (a table of their own, states requested to
 * paid) are subtracted from what is available; they never change these rows.
 */
export function createEarningsRepo(h: DbHandle) {
  const { operatorEarnings: e, nodes, creditTransactions, payouts } = h.t;
  const ledger = ledgerOps(h);
  const num = (v: unknown) => Number(v ?? 0);
  const sumWhen = (cond: ReturnType<typeof sql>) => sql<string>`coalesce(sum(case when ${cond} then ${e.amountMicro} else 0 end), 0)`;
  // What each group shows: the tenants' gross usage, the platform's fee, the refunds the operator gave back, the operator's net.
  const columns = {
    usageMicro: sumWhen(sql`${e.type} = 'usage'`),
    feeMicro: sumWhen(sql`${e.account} = 'platform' and ${e.type} = 'usage'`),
    refundedMicro: sumWhen(sql`${e.account} = 'operator' and ${e.type} = 'refund'`),
    earnedMicro: sumWhen(sql`${e.account} = 'operator'`),
  };
  const present = <T extends Record<keyof typeof columns, unknown>>(r: T) => ({
    usageMicro: num(r.usageMicro),
    feeMicro: num(r.feeMicro),
    refundedMicro: -num(r.refundedMicro),
    earnedMicro: num(r.earnedMicro),
  });

  async function operatorOf(db: Db, nodeId: string): Promise<string> {
    const [n] = await db.select({ operatorId: nodes.operatorId }).from(nodes).where(eq(nodes.id, nodeId));
    if (!n) throw new Error(`earnings: no node ${nodeId}`);
    return n.operatorId;
  }

  async function sumFor(db: Db, ...where: Parameters<typeof and>) {
    const [r] = await db
      .select({ s: sql<string>`coalesce(sum(${e.amountMicro}), 0)` })
      .from(e)
      .where(and(...where));
    return num(r?.s);
  }

  /** What an operator earned in all (net of refunds), and how much of it is still in its hold; payouts are not subtracted here. */
  async function held(db: Db, operatorId: string, nowMs: number, holdMs: number): Promise<{ totalMicro: number; pendingMicro: number }> {
    const mine = and(eq(e.operatorId, operatorId), eq(e.account, "operator"));
    const totalMicro = await sumFor(db, mine);
    const youngMicro = await sumFor(db, mine, eq(e.type, "usage"), gt(e.createdAt, nowMs - holdMs));
    const refundedMicro = -(await sumFor(db, mine, eq(e.type, "refund")));
    return { totalMicro, pendingMicro: Math.max(0, youngMicro - refundedMicro) };
  }

  return {
    /** Inside the charge's transaction: the operator's row and the fee's row for one usage row. */
    async credit(db: Db, dep: DeploymentRow, s: ChargeSplit) {
      const operatorId = await operatorOf(db, dep.nodeId);
      const base = { type: "usage" as const, operatorId, nodeId: dep.nodeId, deploymentId: dep.id, creditTransactionId: s.usageTxnId, createdAt: s.nowMs };
      await db.insert(e).values([
        { ...base, id: s.ids("ern"), account: "operator", amountMicro: s.earnMicro },
        { ...base, id: s.ids("ern"), account: "platform", amountMicro: s.feeMicro },
      ]);
    },

    /**
     * Gives a tenant credits back for a deployment, as a `refund` row on their
     * ledger, at most what the deployment cost less what was refunded before.
     * It is taken from the operator's earnings on that deployment, never more
     * than they have left (on it, and in all); the rest from the platform's fee.
     * Run inside repos.billing.locked, so a charge of the same deployment waits.
     */
    async refund(db: Db, dep: DeploymentRow, r: Refund): Promise<RefundOutcome> {
      const [done] = await db
        .select({ s: sql<string>`coalesce(sum(${creditTransactions.amountMicro}), 0)` })
        .from(creditTransactions)
        .where(and(eq(creditTransactions.deploymentId, dep.id), eq(creditTransactions.type, "refund")));
      const refundableMicro = Math.max(0, dep.totalCostMicro - num(done?.s));
      if (r.amountMicro <= 0 || r.amountMicro > refundableMicro) return { ok: false, refundableMicro };
      const operatorId = await operatorOf(db, dep.nodeId);
      const mine = eq(e.account, "operator");
      const onDeployment = await sumFor(db, mine, eq(e.deploymentId, dep.id));
      // What the operator still holds: paid out or in-flight payouts are not theirs to give back.
      const [out] = await db
        .select({ s: sql<string>`coalesce(sum(${payouts.amountMicro}), 0)` })
        .from(payouts)
        .where(and(eq(payouts.operatorId, operatorId), inArray(payouts.status, ["requested", "sending", "paid"])));
      const inAll = (await sumFor(db, mine, eq(e.operatorId, operatorId))) - num(out?.s);
      const fromOperatorMicro = Math.max(0, Math.min(r.amountMicro, onDeployment, inAll));
      const fromFeeMicro = r.amountMicro - fromOperatorMicro;
      const txn = await ledger.post(db, {
        id: r.ids("txn"),
        userId: dep.userId,
        type: "refund",
        amountMicro: r.amountMicro,
        description: r.description,
        deploymentId: dep.id,
        createdAt: r.nowMs,
      });
      const base = { type: "refund" as const, operatorId, nodeId: dep.nodeId, deploymentId: dep.id, creditTransactionId: txn.id, createdAt: r.nowMs };
      const rows = [
        { ...base, id: r.ids("ern"), account: "operator" as const, amountMicro: -fromOperatorMicro },
        { ...base, id: r.ids("ern"), account: "platform" as const, amountMicro: -fromFeeMicro },
      ].filter((row) => row.amountMicro !== 0);
      if (rows.length) await db.insert(e).values(rows);
      return { ok: true, transactionId: txn.id, fromOperatorMicro, fromFeeMicro };
    },

    /**
     * What an operator has earned, net of refunds: pending while a usage row is
     * younger than the hold, available after. A refund is taken from pending
     * first (that is what the hold is for), then from available.
     */
    async summary(operatorId: string, nowMs: number, holdMs: number, days: number): Promise<EarningsSummaryMicro> {
      return h.run(async (db) => {
        const { totalMicro, pendingMicro } = await held(db, operatorId, nowMs, holdMs);
        const byNode = await db
          .select({ nodeId: e.nodeId, ...columns })
          .from(e)
          .where(eq(e.operatorId, operatorId))
          .groupBy(e.nodeId)
          .orderBy(e.nodeId);
        const firstDayMs = Math.floor(nowMs / DAY_MS) * DAY_MS - (days - 1) * DAY_MS;
        // Integer division on both databases: the UTC day a row falls in. Inlined, so PostgreSQL sees the grouped expression in the select.
        const day = sql<string>`(${e.createdAt} / ${sql.raw(String(DAY_MS))})`;
        const byDay = await db
          .select({ day, ...columns })
          .from(e)
          .where(and(eq(e.operatorId, operatorId), gte(e.createdAt, firstDayMs)))
          .groupBy(day)
          .orderBy(desc(day));
        return {
          pendingMicro,
          availableMicro: totalMicro - pendingMicro,
          byNode: byNode.map((r) => ({ nodeId: r.nodeId, ...present(r) })),
          byDay: byDay.map((r) => ({ dayStartMs: Math.floor(num(r.day)) * DAY_MS, ...present(r) })),
        };
      });
    },

    held,

    /** The operator's own rows, newest first. */
    async list(operatorId: string, page: number, limit: number): Promise<{ rows: EarningRow[]; total: number }> {
      return h.run(async (db) => {
        const w = and(eq(e.operatorId, operatorId), eq(e.account, "operator"));
        const rows = await db
          .select()
          .from(e)
          .where(w)
          .orderBy(desc(e.createdAt), desc(e.id))
          .limit(limit)
          .offset((page - 1) * limit);
        const [c] = await db.select({ n: count() }).from(e).where(w);
        return { rows, total: num(c?.n) };
      });
    },

    /** The slow way, over every row of both ledgers. */
    async books(): Promise<EarningsBooks> {
      return h.run(async (db) => {
        const [t] = await db
          .select({
            usage: sql<string>`coalesce(sum(case when ${creditTransactions.type} = 'usage' then -${creditTransactions.amountMicro} else 0 end), 0)`,
            refunds: sql<string>`coalesce(sum(case when ${creditTransactions.type} = 'refund' then ${creditTransactions.amountMicro} else 0 end), 0)`,
          })
          .from(creditTransactions);
        return {
          usageMicro: num(t?.usage),
          refundsMicro: num(t?.refunds),
          operatorMicro: await sumFor(db, eq(e.account, "operator")),
          platformMicro: await sumFor(db, eq(e.account, "platform")),
        };
      });
    },
  };
}
export type EarningsRepo = ReturnType<typeof createEarningsRepo>;
