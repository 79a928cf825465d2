import { z } from "zod";
import { API_KEY_SCOPES, type ApiKeyScope, DEFAULT_API_KEY_SCOPES } from "../lists";
import { nameText, SuccessResponse, Timestamp, text } from "./common";

export const User = z.object({ id: z.string(), walletAddress: z.string(), isOperator: z.boolean(), createdAt: Timestamp }).meta({ id: "User" });
export type User = z.infer<typeof User>;

const wallet = text().max(64).meta({ description: "Solana wallet address (base58 ed25519 public key)" });

export const NonceRequest = z.strictObject({ walletAddress: wallet });
export const NonceResponse = z.object({
  nonce: z.string(),
  message: z.string(),
  expiresAt: z.number().int().meta({ description: "epoch milliseconds" }),
});

export const VerifyRequest = z.strictObject({
  walletAddress: wallet,
  signature: text().max(200).meta({ description: "base64 ed25519 signature of message" }),
  message: text().max(2000),
});

export const TokenPair = z.object({
  accessToken: z.string(),
  refreshToken: z.string(),
  expiresAt: z.number().int().meta({ description: "epoch milliseconds when accessToken expires" }),
});
export const VerifyResponse = TokenPair.extend({ user: User });
export const RefreshRequest = z.strictObject({ refreshToken: text().max(200) });
export const MeResponse = z.object({ user: User });
export const LogoutRequest = z.strictObject({ refreshToken: text().max(200) });
export const LogoutResponse = SuccessResponse;

export { API_KEY_SCOPES, type ApiKeyScope, DEFAULT_API_KEY_SCOPES };
export const ApiKeyScopeSchema = z.enum(API_KEY_SCOPES).meta({
  description:
    "read: the catalogue, your deployments, their logs and events, your balance and ledger. deploy: create, start, stop and delete deployments, exec, TCP, registry logins, deposits. operator: your nodes and earnings. payouts: requesting a payout",
});
/** The start of every API key, so that it is told from a session token at a glance and secret scanners can find one. */
export const API_KEY_PREFIX = "cmk_";
/** Keys one account may hold: far more than scripts need, few enough that a listing stays one page. */
export const API_KEYS_MAX = 50;
/** The longest life a key may be given: a year. */
export const API_KEY_MAX_TTL_S = 366 * 24 * 3600;

export const CreateApiKeyRequest = z.strictObject({
  name: nameText(100).meta({ description: "a label for you: what uses the key (at most 100 characters)" }),
  scopes: z
    .array(ApiKeyScopeSchema)
    .min(1)
    .max(API_KEY_SCOPES.length)
    .refine((s) => new Set(s).size === s.length, "scopes must not repeat")
    .meta({ description: "what the key may do, each named once; payouts only when named", uniqueItems: true }),
  expiresInS: z
    .number()
    .int()
    .min(60)
    .max(API_KEY_MAX_TTL_S)
    .optional()
    .meta({ description: `seconds from now until the key stops working (60 to ${API_KEY_MAX_TTL_S}); left out: it works until deleted` }),
});
export type CreateApiKeyRequest = z.infer<typeof CreateApiKeyRequest>;

export const ApiKey = z
  .object({
    id: z.string(),
    name: z.string(),
    prefix: z.string().meta({ description: "the key's first characters (cmk_ and 8 more), to tell keys apart; never the whole key" }),
    scopes: z.array(ApiKeyScopeSchema),
    createdAt: Timestamp,
    lastUsedAt: Timestamp.nullable().meta({ description: "when a request last authenticated with it (to the minute); null: never" }),
    expiresAt: Timestamp.nullable().meta({ description: "when it stops working; null: never (until deleted)" }),
  })
  .meta({ id: "ApiKey", description: "An API key, without the key" });
export type ApiKey = z.infer<typeof ApiKey>;

export const CreateApiKeyResponse = z.object({
  apiKey: ApiKey,
  key: z.string().meta({ description: "the key itself (cmk_...): shown this once, stored only as its SHA-256. Send it as 'Authorization: Bearer <key>'" }),
});
export const ApiKeyListResponse = z.object({ apiKeys: z.array(ApiKey) });
