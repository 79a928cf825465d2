import type { ApiKeyRow, Repos, UserRow } from "@cm/db";
import { API_KEY_PREFIX, API_KEYS_MAX, type ApiKey, type ApiKeyScope, type CreateApiKeyRequest } from "@cm/protocol";
import { ApiError } from "../errors";
import type { AccessGrant } from "./auth-service";
import type { EventBus } from "./events";
import { type Clock, hashSecret, type IdGenerator, newSecret } from "./ids";

/** Characters of a key kept to show it by: `cmk_` and 8 of its 43 random ones (48 bits: far too few to use, enough to tell keys apart). */
const SHOWN_CHARS = API_KEY_PREFIX.length + 8;
/** How stale lastUsedAt may be: noting every use would be a write per request. */
const LAST_USED_EVERY_MS = 60_000;

const iso = (ms: number) => new Date(ms).toISOString();

/** The API's shape: never the key, nor its hash. */
export const presentApiKey = (k: ApiKeyRow): ApiKey => ({
  id: k.id,
  name: k.name,
  prefix: k.prefix,
  scopes: k.scopes,
  createdAt: iso(k.createdAt),
  lastUsedAt: k.lastUsedAt === null ? null : iso(k.lastUsedAt),
  expiresAt: k.expiresAt === null ? null : iso(k.expiresAt),
});

/** Tells an API key from a session token by its prefix alone. */
export const isApiKey = (bearer: string) => bearer.startsWith(API_KEY_PREFIX);

/**
 * API keys for scripts. A key is 32 random bytes behind `cmk_`, answered once
 * and stored as its SHA-256: a key is not a password a person chose, so a slow
 * hash (bcrypt, scrypt) would add nothing against guessing 256 bits and would
 * cost every request it authenticates. Each use reads the key's row (no cache),
 * so a deleted key is refused by the next request on every replica.
 */
export function createApiKeys(repos: Repos, clock: Clock, ids: IdGenerator, events: EventBus) {
  return {
    async create(userId: string, body: CreateApiKeyRequest): Promise<{ row: ApiKeyRow; key: string }> {
      const key = newSecret(API_KEY_PREFIX.slice(0, -1));
      const now = clock.now();
      const created = await repos.auth.apiKeys.create(
        {
          id: ids("key"),
          userId,
          name: body.name,
          prefix: key.slice(0, SHOWN_CHARS),
          keyHash: hashSecret(key),
          scopes: body.scopes,
          createdAt: now,
          expiresAt: body.expiresInS === undefined ? null : now + body.expiresInS * 1000,
        },
        API_KEYS_MAX,
      );
      if ("refused" in created) throw new ApiError("API_KEY_QUOTA_EXCEEDED", `you already hold ${API_KEYS_MAX} API keys; delete one first`);
      return { row: created, key };
    },

    list: (userId: string) => repos.auth.apiKeys.list(userId),

    /** Deletes the key: requests with it are refused from now on, and the streams and exec sessions it opened end. */
    async remove(id: string, userId: string): Promise<void> {
      if (!(await repos.auth.apiKeys.remove(id, userId))) throw new ApiError("API_KEY_NOT_FOUND", `no API key ${id}`);
      // Its id is the family of the grants it opened (see authenticate): this replica ends them now, others at their next check.
      events.emit("family-revoked", id);
    },

    /** The account behind a key, its scopes and what it grants a connection, or the reason there is none. */
    async authenticate(key: string): Promise<{ user: UserRow; grant: AccessGrant; scopes: readonly ApiKeyScope[] }> {
      const keyHash = hashSecret(key);
      const row = await repos.auth.apiKeys.findByHash(keyHash);
      if (!row) throw new ApiError("UNAUTHORIZED", "unknown API key (deleted, or never issued)");
      const now = clock.now();
      if (row.expiresAt !== null && row.expiresAt <= now)
        throw new ApiError("API_KEY_EXPIRED", `the API key ${row.prefix}… expired at ${iso(row.expiresAt)}; create a new one`);
      const user = await repos.auth.getUser(row.userId);
      if (!user) throw new ApiError("UNAUTHORIZED", "unknown API key (deleted, or never issued)");
      if (row.lastUsedAt === null || now - row.lastUsedAt >= LAST_USED_EVERY_MS) await repos.auth.apiKeys.markUsed(row.id, now, LAST_USED_EVERY_MS);
      return {
        user,
        scopes: row.scopes,
        grant: { tokenHash: keyHash, familyId: row.id, userId: user.id, expiresAt: row.expiresAt ?? Number.MAX_SAFE_INTEGER, apiKey: true },
      };
    },
  };
}
export type ApiKeys = ReturnType<typeof createApiKeys>;
