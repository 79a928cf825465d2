import { randomBytes } from "node:crypto";
import type { Repos, UserRow } from "@cm/db";
import type { ApiKeyScope } from "@cm/protocol";
import bs58 from "bs58";
import nacl from "tweetnacl";
import { ApiError } from "../errors";
import { createApiKeys, isApiKey } from "./api-keys";
import type { EventBus } from "./events";
import { type Clock, hashSecret, type IdGenerator, newSecret } from "./ids";

export type AuthSettings = { domain: string; nonceTtlS: number; accessTtlS: number; refreshTtlS: number };

/**
 * What a request's access token grants, kept by a connection that outlives the
 * request (a stream, an exec session): which sign-in it belongs to (its family)
 * and until when, so that the connection ends with it.
 */
export type AccessGrant = {
  tokenHash: string;
  /** The sign-in's family, or for an API key the key's id: revoking it ends every connection it opened. */
  familyId: string;
  userId: string;
  expiresAt: number;
  /** Opened with an API key (its expiry is the key's, and there is no refresh). */
  apiKey?: true;
};

/**
 * What a route asks of a bearer: an API key scope, `any` (any valid token or
 * key), or `session` (a signed-in wallet only: managing API keys). A wallet
 * session passes every one.
 */
export type RouteScope = ApiKeyScope | "any" | "session";

/** Who a bearer is and what it may do; `scopes` is absent for a wallet session, which may do everything. */
export type Credential = { user: UserRow; grant: AccessGrant; scopes?: readonly ApiKeyScope[] };

/** Refuses a credential that lacks `need`: 403 INSUFFICIENT_SCOPE naming the scope. */
export function permit(credential: Credential, need: RouteScope): void {
  const { scopes } = credential;
  if (scopes === undefined || need === "any" || (need !== "session" && scopes.includes(need))) return;
  const details = { requiredScope: need, keyScopes: scopes };
  if (need === "session")
    throw new ApiError(
      "INSUFFICIENT_SCOPE",
      "API keys are created, listed and deleted only with a signed-in wallet session (cm login), never with an API key",
      details,
    );
  throw new ApiError("INSUFFICIENT_SCOPE", `this API key lacks the '${need}' scope this route needs (it has: ${scopes.join(", ")})`, details);
}

export function decodeWallet(walletAddress: string): Uint8Array {
  let key: Uint8Array;
  try {
    key = bs58.decode(walletAddress);
  } catch {
    throw new ApiError("INVALID_WALLET_ADDRESS", "walletAddress is not valid base58");
  }
  if (key.length !== 32) throw new ApiError("INVALID_WALLET_ADDRESS", `walletAddress decodes to ${key.length} bytes; a Solana public key has 32`);
  return key;
}

/** "7xKXtg2C…osgAsU": enough for a person to recognise their wallet in the message. */
export const abbreviate = (w: string) => (w.length > 12 ? `${w.slice(0, 4)}…${w.slice(-4)}` : w);

export function signInMessage(domain: string, walletAddress: string, nonce: string, issuedAt: Date) {
  // The domain opens the message (as in Sign-In With Solana) so a wallet can check
  // it against the site asking; each field on its own line, as the spec asks.
  return [
    `${domain} wants you to sign in with your Solana account:`,
    abbreviate(walletAddress),
    "Sign in to the compute marketplace. This request costs nothing and sends no transaction.",
    `Nonce: ${nonce}`,
    `Issued At: ${issuedAt.toISOString()}`,
  ].join("\n");
}

export function decodeSignature(signature: string): Uint8Array {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(signature)) throw new ApiError("INVALID_SIGNATURE", "signature is not base64");
  const bytes = Buffer.from(signature, "base64");
  if (bytes.length !== 64) throw new ApiError("INVALID_SIGNATURE", `signature decodes to ${bytes.length} bytes; an ed25519 signature has 64`);
  return new Uint8Array(bytes);
}

export function createAuthService(repos: Repos, clock: Clock, ids: IdGenerator, events: EventBus, s: AuthSettings) {
  const apiKeys = createApiKeys(repos, clock, ids, events);

  async function issuePair(userId: string, familyId: string) {
    const now = clock.now();
    const accessToken = newSecret("cma");
    const refreshToken = newSecret("cmr");
    const expiresAt = now + s.accessTtlS * 1000;
    await repos.auth.insertSessions([
      { tokenHash: hashSecret(accessToken), kind: "access", userId, familyId, expiresAt, createdAt: now },
      { tokenHash: hashSecret(refreshToken), kind: "refresh", userId, familyId, expiresAt: now + s.refreshTtlS * 1000, createdAt: now },
    ]);
    return { accessToken, refreshToken, expiresAt };
  }

  /** The user behind an access token and what it grants, or the reason there is none. */
  async function authenticateSession(accessToken: string): Promise<Credential> {
    const tokenHash = hashSecret(accessToken);
    const session = await repos.auth.findSession(tokenHash);
    if (!session || session.kind !== "access" || session.revokedAt !== null) throw new ApiError("UNAUTHORIZED", "unknown access token");
    if (session.expiresAt <= clock.now()) throw new ApiError("TOKEN_EXPIRED", "the access token has expired; call POST /auth/refresh");
    const user = await repos.auth.getUser(session.userId);
    if (!user) throw new ApiError("UNAUTHORIZED", "unknown access token");
    return { user, grant: { tokenHash, familyId: session.familyId, userId: user.id, expiresAt: session.expiresAt } };
  }

  /** An access token or an API key (told apart by its prefix), refused unless it may do `need`. */
  async function authenticateToken(bearer: string, need: RouteScope): Promise<Credential> {
    const credential = isApiKey(bearer) ? await apiKeys.authenticate(bearer) : await authenticateSession(bearer);
    permit(credential, need);
    return credential;
  }

  return {
    async nonce(walletAddress: string) {
      decodeWallet(walletAddress);
      const now = clock.now();
      const nonce = randomBytes(16).toString("hex");
      const message = signInMessage(s.domain, walletAddress, nonce, new Date(now));
      const expiresAt = now + s.nonceTtlS * 1000;
      await repos.auth.insertNonce({ nonce, walletAddress, message, expiresAt });
      return { nonce, message, expiresAt };
    },

    async verify(walletAddress: string, signature: string, message: string) {
      const key = decodeWallet(walletAddress);
      const sig = decodeSignature(signature);
      if (!nacl.sign.detached.verify(new TextEncoder().encode(message), sig, key)) {
        throw new ApiError("INVALID_SIGNATURE", "the signature does not verify over the message with this wallet's key");
      }
      // Only a verified signature may spend the nonce: otherwise anyone could burn
      // another wallet's pending sign-in by posting garbage with its message.
      const spent = await repos.auth.consumeNonce(walletAddress, message, clock.now());
      if (!spent.ok) {
        throw spent.reason === "expired"
          ? new ApiError("NONCE_EXPIRED", "this sign-in message has expired; request a new nonce")
          : new ApiError("NONCE_NOT_FOUND", "this message was not issued to this wallet, or was already used");
      }
      const user = await repos.auth.upsertUser(ids("usr"), walletAddress, clock.now());
      return { user, ...(await issuePair(user.id, ids("fam"))) };
    },

    async refresh(refreshToken: string) {
      const spent = await repos.auth.spendRefreshToken(hashSecret(refreshToken), clock.now());
      // A token used twice revoked its family: what it opened ends too.
      if (!spent.ok && spent.revokedFamilyId) events.emit("family-revoked", spent.revokedFamilyId);
      if (!spent.ok) throw new ApiError("INVALID_REFRESH_TOKEN", "this refresh token is unknown, expired, revoked or already used; sign in again");
      return issuePair(spent.session.userId, spent.session.familyId);
    },

    /** Signs out: the refresh token's whole family (every access and refresh token issued from its sign-in) stops working. */
    async logout(refreshToken: string) {
      const familyId = await repos.auth.revokeFamily(hashSecret(refreshToken), clock.now());
      if (!familyId) throw new ApiError("INVALID_REFRESH_TOKEN", "this refresh token is unknown");
      events.emit("family-revoked", familyId);
    },

    apiKeys,

    /** The user behind an Authorization header and what its token or API key grants, or the reason there is none (401, or 403 lacking `need`). */
    async authenticate(header: string | undefined, need: RouteScope): Promise<Credential> {
      const m = header?.match(/^Bearer\s+(\S+)\s*$/i);
      if (!m)
        throw new ApiError(
          "UNAUTHORIZED",
          header ? "the Authorization header must be 'Bearer <accessToken or API key>'" : "this route needs 'Authorization: Bearer <accessToken or API key>'",
        );
      return authenticateToken(m[1]!, need);
    },

    /**
     * The same for a bare access token or API key: an exec session's or TCP connection's `renew`,
     * which by default needs what opening one does (`deploy`).
     */
    authenticateToken: (bearer: string, need: RouteScope = "deploy") => authenticateToken(bearer, need),
  };
}
export type AuthService = ReturnType<typeof createAuthService>;
