import { and, asc, count, eq, sql } from "drizzle-orm";
import type { DbHandle } from "../client";
import type { RegistryCredentialRow } from "../types";

export type NewRegistryCredential = Omit<RegistryCredentialRow, "lastUsedAt">;

/** Tenants' registry logins. The secret is stored as the caller sealed it: this layer never sees it in the clear. */
export function createRegistryCredentialsRepo(h: DbHandle) {
  const { registryCredentials: rc, users } = h.t;
  return {
    /** Adds the credential unless its owner already stores `max`; the owner's row is locked first, so parallel adds cannot pass the bound. */
    async create(row: NewRegistryCredential, max: number): Promise<RegistryCredentialRow | { refused: "QUOTA_EXCEEDED" }> {
      return h.transaction(async (db) => {
        await db
          .update(users)
          .set({ ledgerSeq: sql`${users.ledgerSeq}` })
          .where(eq(users.id, row.userId));
        const [held] = await db.select({ n: count() }).from(rc).where(eq(rc.userId, row.userId));
        if (Number(held?.n ?? 0) >= max) return { refused: "QUOTA_EXCEEDED" as const };
        const [created] = await db
          .insert(rc)
          .values({ ...row, lastUsedAt: null })
          .returning();
        return created!;
      });
    },

    /** One credential; with userId, only when it is theirs. */
    async get(id: string, userId?: string): Promise<RegistryCredentialRow | undefined> {
      return h.run(
        async (db) =>
          (
            await db
              .select()
              .from(rc)
              .where(and(eq(rc.id, id), userId ? eq(rc.userId, userId) : undefined))
          )[0],
      );
    },

    /** The owner's credentials, oldest first. */
    async list(userId: string): Promise<RegistryCredentialRow[]> {
      return h.run((db) => db.select().from(rc).where(eq(rc.userId, userId)).orderBy(asc(rc.createdAt), asc(rc.id)));
    },

    /** True when the owner's credential was there and is gone. */
    async remove(id: string, userId: string): Promise<boolean> {
      return h.run(
        async (db) =>
          (
            await db
              .delete(rc)
              .where(and(eq(rc.id, id), eq(rc.userId, userId)))
              .returning({ id: rc.id })
          ).length > 0,
      );
    },

    async markUsed(id: string, nowMs: number): Promise<void> {
      await h.run((db) => db.update(rc).set({ lastUsedAt: nowMs }).where(eq(rc.id, id)));
    },
  };
}
export type RegistryCredentialsRepo = ReturnType<typeof createRegistryCredentialsRepo>;
