import { and, asc, count, eq, inArray, isNull, lt, or, sql } from "drizzle-orm";
import type { DbHandle } from "../client";
import type { ApiKeyRow } from "../types";

export type NewApiKey = Omit<ApiKeyRow, "lastUsedAt">;

/**
 * Tenants' API keys. Only the key's SHA-256 reaches this layer: a key is looked
 * up by its hash on every request it authenticates (no cache, so a delete
 * ends it at once on every replica).
 */
export function createApiKeysRepo(h: DbHandle) {
  const { apiKeys: k, users } = h.t;
  return {
    /** Adds the key unless its owner already holds `max`; the owner's row is locked first, so parallel adds cannot pass the bound. */
    async create(row: NewApiKey, max: number): Promise<ApiKeyRow | { refused: "QUOTA_EXCEEDED" }> {
      return h.transaction(async (db) => {
        await db
          .update(users)
          .set({ ledgerSeq: sql`${users.ledgerSeq}` })
          .where(eq(users.id, row.userId));
        const [held] = await db.select({ n: count() }).from(k).where(eq(k.userId, row.userId));
        if (Number(held?.n ?? 0) >= max) return { refused: "QUOTA_EXCEEDED" as const };
        const [created] = await db
          .insert(k)
          .values({ ...row, lastUsedAt: null })
          .returning();
        return created!;
      });
    },

    async findByHash(keyHash: string): Promise<ApiKeyRow | undefined> {
      return h.run(async (db) => (await db.select().from(k).where(eq(k.keyHash, keyHash)))[0]);
    },

    /** The owner's keys, oldest first. */
    async list(userId: string): Promise<ApiKeyRow[]> {
      return h.run((db) => db.select().from(k).where(eq(k.userId, userId)).orderBy(asc(k.createdAt), asc(k.id)));
    },

    /** The owner's key is gone: its hash, or undefined when the owner had no key of this id. */
    async remove(id: string, userId: string): Promise<string | undefined> {
      return h.run(
        async (db) =>
          (
            await db
              .delete(k)
              .where(and(eq(k.id, id), eq(k.userId, userId)))
              .returning({ keyHash: k.keyHash })
          )[0]?.keyHash,
      );
    },

    /** Notes a use, at most once per `everyMs` per key: a write on every request would cost more than the minute it tells. */
    async markUsed(id: string, nowMs: number, everyMs: number): Promise<void> {
      await h.run((db) =>
        db
          .update(k)
          .set({ lastUsedAt: nowMs })
          .where(and(eq(k.id, id), or(isNull(k.lastUsedAt), lt(k.lastUsedAt, nowMs - everyMs)))),
      );
    },

    /** Which of these hashes name a key that is still there: open connections ask, as they ask of sessions. */
    async liveAmong(keyHashes: readonly string[]): Promise<Set<string>> {
      if (keyHashes.length === 0) return new Set();
      return h.run(async (db) => {
        const rows = await db
          .select({ keyHash: k.keyHash })
          .from(k)
          .where(inArray(k.keyHash, [...keyHashes]));
        return new Set(rows.map((r) => r.keyHash));
      });
    },
  };
}
export type ApiKeysRepo = ReturnType<typeof createApiKeysRepo>;
