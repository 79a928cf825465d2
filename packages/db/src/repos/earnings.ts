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

/**
 * Where an operator's earnings (net of refunds) stand: pending + available +
 * inFlight + paid = all they earned, each never below zero.
 */
export type OperatorHeld = { totalMicro: number; pendingMicro: number; availableMicro: number; inFlightMicro: number; paidMicro: number };

export type EarningsSummaryMicro = OperatorHeld & {
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
  const { operatorEarnings: e, nodes, creditTransactions, payouts, users } = h.t;
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

  /** Payouts in flight (requested or sending) and paid, in micro-credits: one operator's, or everyone's. */
  async function payoutSums(db: Db, operatorId?: string): Promise<{ inFlightMicro: number; paidMicro: number }> {
    const [q] = await db
      .select({
        inFlight: sql<string>`coalesce(sum(case when ${payouts.status} in ('requested', 'sending') then ${payouts.amountMicro} else 0 end), 0)`,
        paid: sql<string>`coalesce(sum(case when ${payouts.status} = 'paid' then ${payouts.amountMicro} else 0 end), 0)`,
      })
      .from(payouts)
      .where(operatorId === undefined ? undefined : eq(payouts.operatorId, operatorId));
    return { inFlightMicro: num(q?.inFlight), paidMicro: num(q?.paid) };
  }

  /**
   * Where an operator's earnings stand. What they hold is everything earned net
   * of refunds, less payouts in flight and paid; of that, what the last
   * EARNINGS_HOLD_HOURS earned stays pending in full, and only the rest is
   * available. So a refund comes out of what is available first: a refund never
   * shortens the hold on recent earnings (taking refunds from pending first let
   * one old refund make today's earnings withdrawable at once).
   */
  async function held(db: Db, operatorId: string, nowMs: number, holdMs: number): Promise<OperatorHeld> {
    const mine = and(eq(e.operatorId, operatorId), eq(e.account, "operator"));
    const totalMicro = await sumFor(db, mine);
    const youngMicro = await sumFor(db, mine, eq(e.type, "usage"), gt(e.createdAt, nowMs - holdMs));
    const { inFlightMicro, paidMicro } = await payoutSums(db, operatorId);
    const holding = Math.max(0, totalMicro - inFlightMicro - paidMicro);
    const pendingMicro = Math.min(youngMicro, holding);
    return { totalMicro, pendingMicro, availableMicro: holding - pendingMicro, inFlightMicro, paidMicro };
  }

  return {
    payoutSums,

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
      // The operator's row too (the tenant's is written below), in id order so two refunds cannot deadlock: a payout
      // request locks the operator's row, so it cannot spend, at the same moment, what this refund takes back.
      for (const id of [...new Set([operatorId, dep.userId])].sort())
        await db
          .update(users)
          .set({ ledgerSeq: sql`${users.ledgerSeq}` })
          .where(eq(users.id, id));
      const mine = eq(e.account, "operator");
      const onDeployment = await sumFor(db, mine, eq(e.deploymentId, dep.id));
      // What the operator still holds: paid out or in-flight payouts are not theirs to give back.
      const out = await payoutSums(db, operatorId);
      const inAll = (await sumFor(db, mine, eq(e.operatorId, operatorId))) - out.inFlightMicro - out.paidMicro;
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

    /** What an operator has earned, net of refunds, split as held() says, with per-node and per-day breakdowns. */
    async summary(operatorId: string, nowMs: number, holdMs: number, days: number): Promise<EarningsSummaryMicro> {
      return h.run(async (db) => {
        const split = await held(db, operatorId, nowMs, holdMs);
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
          ...split,
          byNode: byNode.map((r) => ({ nodeId: r.nodeId, ...present(r) })),
          byDay: byDay.map((r) => ({ dayStartMs: Math.floor(num(r.day)) * DAY_MS, ...present(r) })),
        };
      });
    },

    held,

    /** What each deployment earned its operator so far, usage less refunds, in micro-credits; none for one that earned nothing. */
    async earnedByDeployment(deploymentIds: readonly string[]): Promise<Map<string, number>> {
      if (deploymentIds.length === 0) return new Map();
      const rows = await h.run((db) =>
        db
          .select({ id: e.deploymentId, s: sql<string>`coalesce(sum(${e.amountMicro}), 0)` })
          .from(e)
          .where(and(inArray(e.deploymentId, [...new Set(deploymentIds)]), eq(e.account, "operator")))
          .groupBy(e.deploymentId),
      );
      return new Map(rows.map((r) => [r.id, num(r.s)]));
    },

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
