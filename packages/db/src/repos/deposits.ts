import type { DepositRefusalCode } from "@cm/protocol";
import { and, asc, eq, gte, isNotNull } from "drizzle-orm";
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

    async create(
      row: Omit<DepositRow, "status" | "txSignature" | "transactionId" | "confirmedAt" | "reference" | "refusalCode" | "refusalSignature"> & {
        reference: string;
      },
    ): Promise<DepositRow & { reference: string }> {
      return h.run(
        async (db) =>
          (
            await db
              .insert(deposits)
              .values({ ...row, status: "pending" })
              .returning()
          )[0]! as DepositRow & { reference: string },
      );
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
     * Pending deposits with a reference whose expiresAt is at or after `expiredSinceMs`,
     * oldest first: what a watcher looks for. The filter is deposits_open_idx's
     * (status, expires_at), so the scan reads the open deposits only: with 100,000
     * deposits of which 1,000 open, PostgreSQL and SQLite both search that index and
     * sort the 1,000 (1.5 ms on PostgreSQL).
     */
    async openWithReference(expiredSinceMs: number, limit: number): Promise<Array<DepositRow & { reference: string }>> {
      return h.run(
        async (db) =>
          (await db
            .select()
            .from(deposits)
            .where(and(eq(deposits.status, "pending"), isNotNull(deposits.reference), gte(deposits.expiresAt, expiredSinceMs)))
            .orderBy(asc(deposits.createdAt), asc(deposits.id))
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
