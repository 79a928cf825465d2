import { and, eq, inArray, isNull } from "drizzle-orm";
import type { DbHandle } from "../client";
import type { UserRow } from "../types";
import { createApiKeysRepo } from "./api-keys";

export type ConsumeNonceResult = { ok: true } | { ok: false; reason: "not_found" | "expired" };
export type SessionKind = "access" | "refresh";
export type SessionRow = {
  tokenHash: string;
  kind: SessionKind;
  userId: string;
  familyId: string;
  expiresAt: number;
  usedAt: number | null;
  revokedAt: number | null;
};

export function createAuthRepo(h: DbHandle) {
  const { users, authNonces, sessions } = h.t;
  const apiKeys = createApiKeysRepo(h);
  return {
    apiKeys,

    async insertNonce(n: { nonce: string; walletAddress: string; message: string; expiresAt: number }) {
      await h.run((db) => db.insert(authNonces).values({ ...n, usedAt: null }));
    },

    /**
     * Marks the message used in the same statement that checks it is unused, so a
     * replay or a race between two verifies lets exactly one through.
     */
    async consumeNonce(walletAddress: string, message: string, nowMs: number): Promise<ConsumeNonceResult> {
      return h.transaction(async (db) => {
        const [row] = await db
          .select()
          .from(authNonces)
          .where(and(eq(authNonces.walletAddress, walletAddress), eq(authNonces.message, message)))
          .limit(1);
        if (!row || row.usedAt !== null) return { ok: false, reason: "not_found" } as const;
        if (row.expiresAt <= nowMs) return { ok: false, reason: "expired" } as const;
        const claimed = await db
          .update(authNonces)
          .set({ usedAt: nowMs })
          .where(and(eq(authNonces.nonce, row.nonce), isNull(authNonces.usedAt)))
          .returning({ nonce: authNonces.nonce });
        return claimed.length === 1 ? ({ ok: true } as const) : ({ ok: false, reason: "not_found" } as const);
      });
    },

    /** Returns the wallet's user, creating it on first sign-in (a concurrent creator wins quietly). */
    async upsertUser(id: string, walletAddress: string, nowMs: number): Promise<UserRow> {
      return h.run(async (db) => {
        await db.insert(users).values({ id, walletAddress, createdAt: nowMs }).onConflictDoNothing({ target: users.walletAddress });
        const [row] = await db.select().from(users).where(eq(users.walletAddress, walletAddress));
        return row!;
      });
    },

    async getUser(id: string): Promise<UserRow | undefined> {
      return h.run(async (db) => (await db.select().from(users).where(eq(users.id, id)))[0]);
    },

    async insertSessions(rows: Array<Omit<SessionRow, "usedAt" | "revokedAt"> & { createdAt: number }>) {
      await h.run((db) => db.insert(sessions).values(rows.map((r) => ({ ...r, usedAt: null, revokedAt: null }))));
    },

    async findSession(tokenHash: string): Promise<SessionRow | undefined> {
      return h.run(async (db) => (await db.select().from(sessions).where(eq(sessions.tokenHash, tokenHash)))[0]);
    },

    /**
     * Spends a refresh token once. A token already spent means it leaked (or a
     * client raced itself): the whole family is revoked, as OAuth 2.1 advises.
     */
    async spendRefreshToken(tokenHash: string, nowMs: number): Promise<{ ok: true; session: SessionRow } | { ok: false; revokedFamilyId?: string }> {
      return h.transaction(async (db) => {
        const [row] = await db
          .select()
          .from(sessions)
          .where(and(eq(sessions.tokenHash, tokenHash), eq(sessions.kind, "refresh")));
        if (!row || row.revokedAt !== null || row.expiresAt <= nowMs) return { ok: false } as const;
        const spent = await db
          .update(sessions)
          .set({ usedAt: nowMs })
          .where(and(eq(sessions.tokenHash, tokenHash), isNull(sessions.usedAt)))
          .returning({ tokenHash: sessions.tokenHash });
        if (spent.length === 0) {
          await db
            .update(sessions)
            .set({ revokedAt: nowMs })
            .where(and(eq(sessions.familyId, row.familyId), isNull(sessions.revokedAt)));
          return { ok: false, revokedFamilyId: row.familyId } as const;
        }
        return { ok: true, session: row } as const;
      });
    },

    /**
     * Revokes every token of a refresh token's family (sign-out): the family's id, or
     * undefined when no refresh token has this hash. A spent or expired one still
     * names its family: signing out with a stale copy ends the session it came from.
     */
    async revokeFamily(refreshTokenHash: string, nowMs: number): Promise<string | undefined> {
      return h.transaction(async (db) => {
        const [row] = await db
          .select()
          .from(sessions)
          .where(and(eq(sessions.tokenHash, refreshTokenHash), eq(sessions.kind, "refresh")));
        if (!row) return undefined;
        await db
          .update(sessions)
          .set({ revokedAt: nowMs })
          .where(and(eq(sessions.familyId, row.familyId), isNull(sessions.revokedAt)));
        return row.familyId;
      });
    },

    /**
     * Which of these tokens are revoked (or gone): what open connections ask of the database, which every replica shares.
     * An API key's hash counts as live while its key exists (a deleted key is gone).
     */
    async revokedAmong(tokenHashes: readonly string[]): Promise<string[]> {
      if (tokenHashes.length === 0) return [];
      const rows = await h.run((db) =>
        db
          .select({ tokenHash: sessions.tokenHash, revokedAt: sessions.revokedAt })
          .from(sessions)
          .where(inArray(sessions.tokenHash, [...tokenHashes])),
      );
      const live = new Set(rows.filter((r) => r.revokedAt === null).map((r) => r.tokenHash));
      const keys = await apiKeys.liveAmong(tokenHashes.filter((t) => !live.has(t)));
      return tokenHashes.filter((t) => !live.has(t) && !keys.has(t));
    },

    async setOperator(userId: string) {
      await h.run((db) => db.update(users).set({ isOperator: true }).where(eq(users.id, userId)));
    },
  };
}
export type AuthRepo = ReturnType<typeof createAuthRepo>;
