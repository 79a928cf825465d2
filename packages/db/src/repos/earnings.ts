import { and, count, desc, eq, gt, gte, inArray, sql } from "drizzle-orm";
import type { Db, DbHandle } from "../client";
import { type DeploymentRow, type EarningRow, microToCredits, type PayoutRow } from "../types";
import { ledgerOps } from "./ledger";
import { payoutOps } from "./payout-ops";

const DAY_MS = 86_400_000;

/** Makes a fresh id with a prefix (`ern_...`, `txn_...`). */
export type NewId = (prefix: string) => string;

/** A usage charge already split by the caller: what the node's operator earns and what the platform keeps. */
export type ChargeSplit = { usageTxnId: string; earnMicro: number; feeMicro: number; nowMs: number; ids: NewId };

export type Refund = { amountMicro: number; description: string; nowMs: number; ids: NewId };
export type RefundOutcome =
  | { ok: true; transactionId: string; fromOperatorMicro: number; fromFeeMicro: number; failedPayouts: PayoutRow[] }
  | { ok: false; refundableMicro: number };

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

/** Payouts by state, in micro-credits. Requested ones sent nothing yet; sending ones may have, paid ones did. */
export type PayoutSums = { requestedMicro: number; sendingMicro: number; inFlightMicro: number; paidMicro: number };

/** A deployment whose operator keeps more of it (usage less refunds taken from them) than it was charged less its refunds. */
export type KeptOver = { operatorId: string; deploymentId: string; nodeId: string; keptMicro: number; chargedMicro: number; excessMicro: number };

/** An operator who keeps more of their deployments than the payouts they have out (sending or paid) explain. */
export type Overkept = { operatorId: string; excessMicro: number; outMicro: number; deployments: KeptOver[] };

/**
 * The operators' earnings ledger: append-only rows in integer micro-credits,
 * each pointing at the tenant's ledger row it comes from, written in the
 * transaction of that row. Payouts (a table of their own, states requested to
 * paid) are subtracted from what is available; only a refund the platform had
 * to cover while a payout was out writes rows when that payout fails.
 */
export function createEarningsRepo(h: DbHandle) {
  const { operatorEarnings: e, nodes, creditTransactions, payouts } = h.t;
  const ledger = ledgerOps(h);
  const ops = payoutOps(h);
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

  /** Payouts by state (in flight: requested or sending), in micro-credits: one operator's, or everyone's. */
  async function payoutSums(db: Db, operatorId?: string): Promise<PayoutSums> {
    const of = (status: PayoutRow["status"]) => sql<string>`coalesce(sum(case when ${payouts.status} = ${status} then ${payouts.amountMicro} else 0 end), 0)`;
    const [q] = await db
      .select({ requested: of("requested"), sending: of("sending"), paid: of("paid") })
      .from(payouts)
      .where(operatorId === undefined ? undefined : eq(payouts.operatorId, operatorId));
    const [requestedMicro, sendingMicro, paidMicro] = [num(q?.requested), num(q?.sending), num(q?.paid)];
    return { requestedMicro, sendingMicro, inFlightMicro: requestedMicro + sendingMicro, paidMicro };
  }

  /**
   * Deployments whose operator keeps more of them than they were charged less
   * their refunds: one operator's, or everyone's. The tenant's ledger says what
   * each was charged and refunded; the operator's rows what they kept of it.
   */
  async function keptOver(db: Db, operatorId?: string): Promise<KeptOver[]> {
    const theirs = operatorId === undefined ? undefined : eq(e.operatorId, operatorId);
    const charged = db
      .select({ deploymentId: creditTransactions.deploymentId, net: sql<string>`-sum(${creditTransactions.amountMicro})`.as("net") })
      .from(creditTransactions)
      .where(
        and(
          inArray(creditTransactions.type, ["usage", "refund"]),
          theirs && inArray(creditTransactions.deploymentId, db.select({ id: e.deploymentId }).from(e).where(theirs)),
        ),
      )
      .groupBy(creditTransactions.deploymentId)
      .as("charged");
    const kept = sql<string>`sum(${e.amountMicro})`;
    const net = sql<string>`coalesce(max(${charged.net}), 0)`;
    const rows = await db
      .select({ operatorId: e.operatorId, deploymentId: e.deploymentId, nodeId: e.nodeId, kept, net })
      .from(e)
      .leftJoin(charged, eq(charged.deploymentId, e.deploymentId))
      .where(and(eq(e.account, "operator"), theirs))
      .groupBy(e.operatorId, e.deploymentId, e.nodeId)
      .having(sql`${kept} > ${net}`)
      .orderBy(e.operatorId, e.deploymentId);
    return rows.map((r) => ({
      operatorId: r.operatorId,
      deploymentId: r.deploymentId,
      nodeId: r.nodeId,
      keptMicro: num(r.kept),
      chargedMicro: num(r.net),
      excessMicro: num(r.kept) - num(r.net),
    }));
  }

  /**
   * Takes up to `shareMicro` back from an operator: all of it but for what is
   * sending or paid out (gone, or it may be: the platform's fee covers that).
   * What requested payouts hold has not left: as far as the share needs it,
   * those fail (newest first, so the oldest keep their place) before anything is
   * signed for them. The caller holds the operator's row, so no request comes
   * in meanwhile; a payout a sender signs first is sending, read afresh.
   */
  async function takeBack(db: Db, operatorId: string, shareMicro: number, reason: string, nowMs: number) {
    const mine = and(eq(e.operatorId, operatorId), eq(e.account, "operator"));
    const measure = async () => {
      const totalMicro = await sumFor(db, mine);
      const s = await payoutSums(db, operatorId);
      const takenMicro = Math.max(0, Math.min(shareMicro, totalMicro - s.sendingMicro - s.paidMicro));
      // What the requested payouts would have to give up for it.
      return { takenMicro, shortMicro: takenMicro - Math.max(0, totalMicro - s.inFlightMicro - s.paidMicro) };
    };
    const waiting = await db
      .select({ id: payouts.id })
      .from(payouts)
      .where(and(eq(payouts.operatorId, operatorId), eq(payouts.status, "requested")))
      .orderBy(desc(payouts.requestedAt), desc(payouts.id));
    const failedPayouts: PayoutRow[] = [];
    for (const w of waiting) {
      if ((await measure()).shortMicro <= 0) break;
      const row = await ops.failUnsent(db, w.id, reason, nowMs);
      if (row) failedPayouts.push(row);
    }
    const { takenMicro, shortMicro } = await measure();
    // Never what a payout in flight still holds.
    return { takenMicro: takenMicro - Math.max(0, shortMicro), failedPayouts };
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
     * It is taken from the operator's earnings on that deployment, in full, but
     * never more than they have not been paid or are not being paid (requested
     * payouts that hold it fail: see takeBack); the rest from the platform's fee.
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
      for (const id of [...new Set([operatorId, dep.userId])].sort()) await ops.lockUser(db, id);
      const onDeployment = await sumFor(db, eq(e.account, "operator"), eq(e.deploymentId, dep.id));
      const why = `a refund of ${microToCredits(r.amountMicro)} credits for deployment ${dep.id} took back earnings this payout held; ask again for what is available`;
      const { takenMicro: fromOperatorMicro, failedPayouts } = await takeBack(db, operatorId, Math.min(r.amountMicro, onDeployment), why, r.nowMs);
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
      return { ok: true, transactionId: txn.id, fromOperatorMicro, fromFeeMicro, failedPayouts };
    },

    /**
     * Inside the transaction that failed `payout` (sent nothing, and never will),
     * after its operator's row was locked: what it held is the operator's again,
     * but for what refunds could not take back while it was out (the platform's
     * fee covered that). That is taken now, as refund rows (operator -, platform
     * +) on the deployments they keep more of than they were charged less
     * refunds, until what they keep beyond that is no more than they have
     * sending or paid. The rows' ids come from the payout's, which fails once.
     */
    async settleFailedPayout(db: Db, payout: PayoutRow, nowMs: number) {
      const over = await keptOver(db, payout.operatorId);
      if (over.length === 0) return;
      const s = await payoutSums(db, payout.operatorId);
      let dueMicro = over.reduce((sum, d) => sum + d.excessMicro, 0) - s.sendingMicro - s.paidMicro;
      const rows = [];
      for (const d of over) {
        if (dueMicro <= 0) break;
        const takeMicro = Math.min(d.excessMicro, dueMicro);
        const [refund] = await db
          .select({ id: creditTransactions.id })
          .from(creditTransactions)
          .where(and(eq(creditTransactions.deploymentId, d.deploymentId), eq(creditTransactions.type, "refund")))
          .orderBy(desc(creditTransactions.createdAt), desc(creditTransactions.id))
          .limit(1);
        // Without a refund an operator never keeps more than a deployment was charged (their share is below it).
        if (!refund) throw new Error(`earnings: ${d.deploymentId} kept beyond its charges without a refund`);
        const base = {
          type: "refund" as const,
          operatorId: payout.operatorId,
          nodeId: d.nodeId,
          deploymentId: d.deploymentId,
          creditTransactionId: refund.id,
          createdAt: nowMs,
        };
        rows.push(
          { ...base, id: `ern_${payout.id}_${rows.length}`, account: "operator" as const, amountMicro: -takeMicro },
          { ...base, id: `ern_${payout.id}_${rows.length + 1}`, account: "platform" as const, amountMicro: takeMicro },
        );
        dueMicro -= takeMicro;
      }
      if (rows.length) await db.insert(e).values(rows);
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

    /**
     * Operators who keep more of their deployments than those were charged less
     * refunds, beyond what their payouts sending or paid explain (a refund may
     * not take back what left): none, ever, if refunds take the operator's share
     * from what they still hold and a failed payout gives back only what refunds
     * left. For audits and the tests' invariants.
     */
    async overkept(): Promise<Overkept[]> {
      return h.run(async (db) => {
        const byOperator = new Map<string, KeptOver[]>();
        for (const d of await keptOver(db)) byOperator.set(d.operatorId, [...(byOperator.get(d.operatorId) ?? []), d]);
        const out: Overkept[] = [];
        for (const [operatorId, deployments] of byOperator) {
          const s = await payoutSums(db, operatorId);
          const excessMicro = deployments.reduce((sum, d) => sum + d.excessMicro, 0);
          if (excessMicro > s.sendingMicro + s.paidMicro) out.push({ operatorId, excessMicro, outMicro: s.sendingMicro + s.paidMicro, deployments });
        }
        return out;
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
