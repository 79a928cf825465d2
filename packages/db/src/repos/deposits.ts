import type { DepositRefusalCode } from "@cm/protocol";
import { and, asc, eq, gte, inArray, isNotNull, sql } from "drizzle-orm";
import type { DbHandle } from "../client";
import type { CreditPackageRow, CreditTransactionRow, DepositRow } from "../types";
import { ledgerOps } from "./ledger";

export type ConfirmOutcome =
  | { kind: "credited"; transaction: CreditTransactionRow }
  | { kind: "already_confirmed"; deposit: DepositRow; transaction: CreditTransactionRow | undefined }
  | { kind: "signature_used" }
  | { kind: "not_pending"; deposit: DepositRow };

/** PostgreSQL and SQLite both say "unique" in a unique-violation message; their codes differ. */
const isUniqueViolation = (err: unknown) => {
  const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } };
  const code = e?.code ?? e?.cause?.code;
  const msg = `${e?.message ?? ""} ${e?.cause?.message ?? ""}`;
  return code === "23505" || code === "SQLITE_CONSTRAINT_UNIQUE" || /unique/i.test(msg);
};

export function createDepositsRepo(h: DbHandle) {
  const { deposits, creditPackages, creditTransactions } = h.t;
  const ledger = ledgerOps(h);

  return {
    async seedPackages(rows: CreditPackageRow[]) {
      await h.transaction(async (db) => {
        for (const row of rows) {
          const { id, ...rest } = row;
          await db.insert(creditPackages).values(row).onConflictDoUpdate({ target: creditPackages.id, set: rest });
        }
      });
    },
    async packages(): Promise<CreditPackageRow[]> {
      return h.run((db) => db.select().from(creditPackages).orderBy(asc(creditPackages.sortOrder)));
    },
    async package(id: string): Promise<CreditPackageRow | undefined> {
      return h.run(async (db) => (await db.select().from(creditPackages).where(eq(creditPackages.id, id)))[0]);
    },

    /**
     * Opens a deposit unless its account already holds `maxOpen` pending ones not
     * past expiresAt (at row.createdAt); then answers when the oldest of them
     * expires. Counted and inserted in one transaction, under a per-account lock
     * on PostgreSQL (SQLite runs one at a time), so parallel requests cannot pass
     * the bound together.
     */
    async create(
      row: Omit<DepositRow, "status" | "txSignature" | "transactionId" | "confirmedAt" | "reference" | "refusalCode" | "refusalSignature"> & {
        reference: string;
      },
      maxOpen: number,
    ): Promise<(DepositRow & { reference: string }) | { refused: "TOO_MANY_OPEN"; oldestExpiresAt: number }> {
      return h.transaction(async (db) => {
        if (h.dialect === "pg") await db.execute(sql`select pg_advisory_xact_lock(hashtext(${`deposit-cap:${row.userId}`}))`);
        // Filtered in the select, not the where: given status and expires_at there, SQLite
        // (no statistics) walks deposits_open_idx, every account's open deposits, not this account's.
        const open = and(eq(deposits.status, "pending"), gte(deposits.expiresAt, row.createdAt));
        const [held] = await db
          .select({
            n: sql<number | string | null>`sum(case when ${open} then 1 else 0 end)`,
            oldestExpiresAt: sql<number | string | null>`min(case when ${open} then ${deposits.expiresAt} end)`,
          })
          .from(deposits)
          .where(eq(deposits.userId, row.userId));
        if (Number(held?.n ?? 0) >= maxOpen) return { refused: "TOO_MANY_OPEN" as const, oldestExpiresAt: Number(held!.oldestExpiresAt) };
        const [created] = await db
          .insert(deposits)
          .values({ ...row, status: "pending" })
          .returning();
        return created! as DepositRow & { reference: string };
      });
    },
    async get(id: string, userId: string): Promise<DepositRow | undefined> {
      return h.run(
        async (db) =>
          (
            await db
              .select()
              .from(deposits)
              .where(and(eq(deposits.id, id), eq(deposits.userId, userId)))
          )[0],
      );
    },
    /**
     * The pending deposits whose reference is one of `references`, with expiresAt at
     * or after `expiredSinceMs`: those a transaction naming these accounts may pay.
     * Looked up by the reference's unique index alone (given status and expires_at,
     * SQLite would walk deposits_open_idx instead), so the cost follows the keys,
     * not the open deposits.
     */
    async openByReferences(references: readonly string[], expiredSinceMs: number): Promise<Array<DepositRow & { reference: string }>> {
      if (references.length === 0) return [];
      const named = await h.run((db) =>
        db
          .select()
          .from(deposits)
          .where(inArray(deposits.reference, [...references])),
      );
      return named.filter((d): d is DepositRow & { reference: string } => d.status === "pending" && d.expiresAt >= expiredSinceMs);
    },
    /**
     * At most `limit` pending deposits with a reference and expiresAt at or after
     * `fromMs`, soonest to expire first: a walk over every open deposit a page at a
     * time. It reads deposits_open_idx's (status, expires_at) from `fromMs` and stops
     * at `limit`, so a page costs the same with 20 open or 20,000.
     */
    async openFrom(fromMs: number, limit: number): Promise<Array<DepositRow & { reference: string }>> {
      return h.run(
        async (db) =>
          (await db
            .select()
            .from(deposits)
            .where(and(eq(deposits.status, "pending"), isNotNull(deposits.reference), gte(deposits.expiresAt, fromMs)))
            .orderBy(asc(deposits.expiresAt))
            .limit(limit)) as Array<DepositRow & { reference: string }>,
      );
    },
    /**
     * Records a payment found for an open deposit and refused (e.g. PAYMENT_AFTER_EXPIRY),
     * so the deposit can say why nothing was credited: the latest one wins, and a
     * confirmed deposit is left alone.
     */
    async recordRefusal(depositId: string, code: DepositRefusalCode, signature: string): Promise<void> {
      await h.run((db) =>
        db
          .update(deposits)
          .set({ refusalCode: code, refusalSignature: signature })
          .where(and(eq(deposits.id, depositId), eq(deposits.status, "pending"))),
      );
    },
    async transactionBySignature(signature: string): Promise<CreditTransactionRow | undefined> {
      return h.run(async (db) => (await db.select().from(creditTransactions).where(eq(creditTransactions.txSignature, signature)))[0]);
    },

    /**
     * Credits a verified deposit exactly once. The pending -> confirmed update is
     * conditional, so of many concurrent confirms one wins and the rest find it
     * confirmed; the signature is unique in both tables, so one payment can never
     * credit two deposits, whatever the interleaving.
     */
    async confirm(depositId: string, signature: string, txId: string, nowMs: number): Promise<ConfirmOutcome> {
      try {
        return await h.transaction(async (db): Promise<ConfirmOutcome> => {
          const [claimed] = await db
            .update(deposits)
            // A refusal recorded before says nothing once a payment credited the deposit.
            .set({ status: "confirmed", txSignature: signature, transactionId: txId, confirmedAt: nowMs, refusalCode: null, refusalSignature: null })
            .where(and(eq(deposits.id, depositId), eq(deposits.status, "pending")))
            .returning();
          if (!claimed) {
            const [d] = await db.select().from(deposits).where(eq(deposits.id, depositId));
            if (d && d.status === "confirmed") {
              const [t] = d.transactionId ? await db.select().from(creditTransactions).where(eq(creditTransactions.id, d.transactionId)) : [];
              return { kind: "already_confirmed", deposit: d, transaction: t };
            }
            return { kind: "not_pending", deposit: d! };
          }
          const transaction = await ledger.post(db, {
            id: txId,
            userId: claimed.userId,
            type: "deposit",
            amountMicro: claimed.creditsMicro,
            description: `USDC deposit ${depositId}`,
            txSignature: signature,
            depositId,
            createdAt: nowMs,
          });
          return { kind: "credited", transaction };
        });
      } catch (err) {
        if (isUniqueViolation(err)) return { kind: "signature_used" };
        throw err;
      }
    },
  };
}
export type DepositsRepo = ReturnType<typeof createDepositsRepo>;
