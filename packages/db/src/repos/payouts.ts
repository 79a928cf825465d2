import { and, asc, count, desc, eq, gte, inArray, isNotNull, isNull, lt, lte, ne, or, sql } from "drizzle-orm";
import type { Db, DbHandle } from "../client";
import type { PayoutRow } from "../types";
import { createEarningsRepo, type PayoutSums } from "./earnings";
import { payoutOps } from "./payout-ops";
import { execRaw } from "./raw";

/** Payouts that hold their amount: requested or sending (in flight), or paid. A failed one gives it back. */
const HOLDING = ["requested", "sending", "paid"] as const;
/** Payouts the sender works on once approved. */
const OPEN = ["requested", "sending"] as const;
const DAY_MS = 86_400_000;
/** The PostgreSQL advisory lock that serialises daily-limit approvals across replicas (SQLite's BEGIN IMMEDIATE already does). */
const APPROVAL_LOCK = 727_275;

export type NewPayout = Pick<
  PayoutRow,
  "id" | "operatorId" | "amountMicro" | "amountStableBase" | "stableMint" | "stableDecimals" | "walletAddress" | "requestedAt"
> & { error?: string };
export type RequestOutcome = { ok: true; payout: PayoutRow } | { ok: false; availableMicro: number };
/** A signed transfer, recorded before it is sent. */
export type Attempt = { signature: string; signedTx: string; lastValidBlockHeight: number };
export type PayoutBooks = PayoutSums;

/**
 * The payouts table. Every change that matters to money is a compare-and-set on
 * the row (its status, and the signature the caller last saw), so two senders,
 * or a sender and an administrator, never both act on one state of a payout.
 */
export function createPayoutsRepo(h: DbHandle) {
  const { payouts: p } = h.t;
  const earnings = createEarningsRepo(h);
  const ops = payoutOps(h);
  const num = (v: unknown) => Number(v ?? 0);

  /**
   * Fails payout `id` by `fail` (a compare-and-set) in one transaction with what
   * that gives back: what it held, less what refunds could not take back while
   * it was out (earnings.settleFailedPayout). The operator's row is locked
   * first, as a refund or a request locks it, so each sees what the other left.
   */
  async function failing(id: string, nowMs: number, fail: (db: Db) => Promise<PayoutRow | undefined>): Promise<PayoutRow | undefined> {
    return h.transaction(async (db) => {
      const [was] = await db.select({ operatorId: p.operatorId }).from(p).where(eq(p.id, id));
      if (!was) return undefined;
      await ops.lockUser(db, was.operatorId);
      const row = await fail(db);
      if (row) await earnings.settleFailedPayout(db, row, nowMs);
      return row;
    });
  }

  return {
    /**
     * Takes `amountMicro` out of the operator's available earnings into a new
     * payout, or answers what is available. The operator's user row is locked
     * first, so two requests of one operator cannot both spend the same credits.
     */
    async request(row: NewPayout, holdMs: number): Promise<RequestOutcome> {
      return h.transaction(async (db) => {
        await ops.lockUser(db, row.operatorId);
        const { availableMicro } = await earnings.held(db, row.operatorId, row.requestedAt, holdMs);
        if (row.amountMicro > availableMicro) return { ok: false, availableMicro };
        const [payout] = await db
          .insert(p)
          .values({ ...row, error: row.error ?? null, status: "requested", attempt: 0, earlierSignatures: "", updatedAt: row.requestedAt })
          .returning();
        return { ok: true, payout: payout! };
      });
    },

    async get(id: string, operatorId?: string): Promise<PayoutRow | undefined> {
      return h.run(
        async (db) =>
          (
            await db
              .select()
              .from(p)
              .where(and(eq(p.id, id), operatorId ? eq(p.operatorId, operatorId) : undefined))
          )[0],
      );
    },

    async list(operatorId: string | undefined, page: number, limit: number, status?: PayoutRow["status"]): Promise<{ rows: PayoutRow[]; total: number }> {
      return h.run(async (db) => {
        const w = and(operatorId ? eq(p.operatorId, operatorId) : undefined, status ? eq(p.status, status) : undefined);
        const rows = await db
          .select()
          .from(p)
          .where(w)
          .orderBy(desc(p.requestedAt), desc(p.id))
          .limit(limit)
          .offset((page - 1) * limit);
        const [c] = await db.select({ n: count() }).from(p).where(w);
        return { rows, total: num(c?.n) };
      });
    },

    /** An administrator lets requested payouts go (all of them when no id is given); answers those approved now. */
    async approve(id: string | undefined, nowMs: number): Promise<PayoutRow[]> {
      return h.transaction((db) =>
        db
          .update(p)
          .set({ approvedAt: nowMs, error: null, updatedAt: nowMs })
          .where(and(id ? eq(p.id, id) : undefined, eq(p.status, "requested"), isNull(p.approvedAt)))
          .returning(),
      );
    },

    /**
     * An administrator turns a payout down before anything was signed for it
     * (status requested, approved or not): it fails with `reason` and its amount
     * is available again (see failing). Answers it, or undefined when it is past
     * requested.
     */
    async reject(id: string, reason: string, nowMs: number): Promise<PayoutRow | undefined> {
      return failing(id, nowMs, (db) => ops.failUnsent(db, id, reason, nowMs));
    },

    /**
     * PAYOUTS=auto: approves requested payouts, oldest first, while what was
     * approved in the last 24 hours stays within `limitMicro`. One approver at a
     * time across replicas, so two cannot each fill the same room.
     */
    async approveWithinDailyLimit(nowMs: number, limitMicro: number, waitingNote: string): Promise<PayoutRow[]> {
      return h.transaction(async (db) => {
        if (h.dialect === "pg") await execRaw(h, db, sql`select pg_advisory_xact_lock(${APPROVAL_LOCK})`);
        const [used] = await db
          .select({ s: sql<string>`coalesce(sum(${p.amountMicro}), 0)` })
          .from(p)
          .where(and(gte(p.approvedAt, nowMs - DAY_MS), inArray(p.status, [...HOLDING])));
        let room = limitMicro - num(used?.s);
        const waiting = await db
          .select()
          .from(p)
          .where(and(eq(p.status, "requested"), isNull(p.approvedAt)))
          .orderBy(asc(p.requestedAt), asc(p.id));
        const approved: PayoutRow[] = [];
        for (const w of waiting) {
          // Oldest first, without skipping: a large payout is not overtaken forever by small ones.
          if (w.amountMicro > room) break;
          const [row] = await db
            .update(p)
            .set({ approvedAt: nowMs, error: null, updatedAt: nowMs })
            .where(and(eq(p.id, w.id), eq(p.status, "requested"), isNull(p.approvedAt)))
            .returning();
          if (row) {
            approved.push(row);
            room -= row.amountMicro;
          }
        }
        // The rest wait for room: said on each, so its operator sees why it is not sent.
        const left = waiting.filter((w) => !approved.some((a) => a.id === w.id)).map((w) => w.id);
        if (left.length > 0) {
          await db
            .update(p)
            .set({ error: waitingNote, updatedAt: nowMs })
            .where(and(inArray(p.id, left), eq(p.status, "requested"), isNull(p.approvedAt), or(isNull(p.error), ne(p.error, waitingNote))));
        }
        return approved;
      });
    },

    /**
     * Requested payouts nobody approved yet (an administrator's, or room under the daily
     * limit), requested at or before `requestedAtOrBeforeMs`: the oldest `limit`, and how many.
     */
    async unapprovedSince(requestedAtOrBeforeMs: number, limit: number): Promise<{ rows: PayoutRow[]; total: number }> {
      return h.run(async (db) => {
        const w = and(eq(p.status, "requested"), isNull(p.approvedAt), lte(p.requestedAt, requestedAtOrBeforeMs));
        const rows = await db.select().from(p).where(w).orderBy(asc(p.requestedAt), asc(p.id)).limit(limit);
        const [c] = await db.select({ n: count() }).from(p).where(w);
        return { rows, total: num(c?.n) };
      });
    },

    /**
     * Leases approved, unfinished payouts to `owner` until `nowMs + leaseMs`:
     * those nobody holds, whose lease ran out, or that `owner` holds already.
     */
    async claim(owner: string, nowMs: number, leaseMs: number, limit: number): Promise<PayoutRow[]> {
      const free = or(isNull(p.leaseUntil), lt(p.leaseUntil, nowMs), eq(p.leaseOwner, owner));
      const candidates = await h.run((db) =>
        db
          .select({ id: p.id })
          .from(p)
          .where(and(inArray(p.status, [...OPEN]), isNotNull(p.approvedAt), free))
          .orderBy(asc(p.approvedAt), asc(p.id))
          .limit(limit),
      );
      const claimed: PayoutRow[] = [];
      for (const { id } of candidates) {
        const [row] = await h.transaction((db) =>
          db
            .update(p)
            .set({ leaseOwner: owner, leaseUntil: nowMs + leaseMs })
            .where(and(eq(p.id, id), inArray(p.status, [...OPEN]), free))
            .returning(),
        );
        if (row) claimed.push(row);
      }
      return claimed;
    },

    /** Extends `owner`'s lease on an open payout and answers it as it is now; undefined when the lease was lost or the payout is finished. */
    async renew(id: string, owner: string, untilMs: number): Promise<PayoutRow | undefined> {
      const [row] = await h.transaction((db) =>
        db
          .update(p)
          .set({ leaseUntil: untilMs })
          .where(and(eq(p.id, id), eq(p.leaseOwner, owner), inArray(p.status, [...OPEN])))
          .returning(),
      );
      return row;
    },

    /** Lets go of a lease early (a clean shutdown), so another replica need not wait it out. */
    async release(owner: string): Promise<void> {
      await h.transaction((db) => db.update(p).set({ leaseOwner: null, leaseUntil: null }).where(eq(p.leaseOwner, owner)));
    },

    /**
     * Records a new signed transfer in place of `previousSignature` (null for the
     * first), only if the row still holds that one and `owner` its lease. The
     * caller sends it only after this answers the row.
     */
    async recordAttempt(id: string, owner: string, previousSignature: string | null, a: Attempt, nowMs: number): Promise<PayoutRow | undefined> {
      return h.transaction(async (db) => {
        const [row] = await db
          .select()
          .from(p)
          .where(and(eq(p.id, id), eq(p.leaseOwner, owner), inArray(p.status, [...OPEN])));
        if (!row || row.signature !== previousSignature) return undefined;
        const earlier = previousSignature ? [row.earlierSignatures, previousSignature].filter(Boolean).join(" ") : row.earlierSignatures;
        const [updated] = await db
          .update(p)
          .set({ status: "sending", attempt: row.attempt + 1, ...a, earlierSignatures: earlier, updatedAt: nowMs })
          .where(
            and(
              eq(p.id, id),
              eq(p.leaseOwner, owner),
              inArray(p.status, [...OPEN]),
              previousSignature === null ? isNull(p.signature) : eq(p.signature, previousSignature),
            ),
          )
          .returning();
        return updated;
      });
    },

    /** The transfer `signature` landed: paid. Only from sending, with that signature. */
    async markPaid(id: string, signature: string, nowMs: number): Promise<PayoutRow | undefined> {
      const [row] = await h.transaction((db) =>
        db
          .update(p)
          .set({ status: "paid", paidAt: nowMs, error: null, leaseOwner: null, leaseUntil: null, updatedAt: nowMs })
          .where(and(eq(p.id, id), eq(p.status, "sending"), eq(p.signature, signature)))
          .returning(),
      );
      return row;
    },

    /**
     * Nothing moved and nothing will: the amount is available again, less what
     * refunds could not take back while it was out (see failing). Only while the
     * row still holds `signature` (the one the caller saw expire or fail).
     */
    async markFailed(id: string, signature: string | null, error: string, nowMs: number): Promise<PayoutRow | undefined> {
      return failing(id, nowMs, async (db) => {
        const [row] = await db
          .update(p)
          .set({ status: "failed", error, leaseOwner: null, leaseUntil: null, updatedAt: nowMs })
          .where(and(eq(p.id, id), inArray(p.status, [...OPEN]), signature === null ? isNull(p.signature) : eq(p.signature, signature)))
          .returning();
        return row;
      });
    },

    /** What delays a payout (the RPC is down, a send was refused), shown to its operator; changes nothing else. */
    async noteError(id: string, error: string | null, nowMs: number): Promise<void> {
      await h.transaction((db) =>
        db
          .update(p)
          .set({ error, updatedAt: nowMs })
          .where(and(eq(p.id, id), inArray(p.status, [...OPEN]))),
      );
    },

    /**
     * Operators whose payouts in flight and paid exceed all they earned (net of
     * refunds): none, ever, if requests check available earnings and refunds
     * never take back what was paid out. For audits and the tests' invariants.
     */
    async overdrawn(): Promise<Array<{ operatorId: string; earnedMicro: number; payoutsMicro: number }>> {
      return h.run(async (db) => {
        const held = await db
          .select({ operatorId: p.operatorId, s: sql<string>`coalesce(sum(${p.amountMicro}), 0)` })
          .from(p)
          .where(inArray(p.status, [...HOLDING]))
          .groupBy(p.operatorId);
        const out: Array<{ operatorId: string; earnedMicro: number; payoutsMicro: number }> = [];
        for (const r of held) {
          const { totalMicro } = await earnings.held(db, r.operatorId, 0, 0);
          if (num(r.s) > totalMicro) out.push({ operatorId: r.operatorId, earnedMicro: totalMicro, payoutsMicro: num(r.s) });
        }
        return out;
      });
    },

    /** Ledger-wide sums, for audits and the tests' invariants. */
    async books(): Promise<PayoutBooks> {
      return h.run((db) => earnings.payoutSums(db));
    },
  };
}
export type PayoutsRepo = ReturnType<typeof createPayoutsRepo>;
