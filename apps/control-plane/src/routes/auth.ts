import {
  ApiKeyListResponse,
  CreateApiKeyRequest,
  CreateApiKeyResponse,
  LogoutRequest,
  LogoutResponse,
  MeResponse,
  NonceRequest,
  NonceResponse,
  RefreshRequest,
  SuccessResponse,
  TokenPair,
  VerifyRequest,
  VerifyResponse,
} from "@cm/protocol";
import type { Deps } from "../deps";
import { presentUser } from "../http/presenters";
import { createRouter, IdParams, json, jsonBody, type RouteFactory } from "../http/route";
import { presentApiKey } from "../services/api-keys";

/** Sign-in with a wallet signature; mounted at /auth. */
export function authRoutes(deps: Deps, route: RouteFactory) {
  const tags = ["auth"];
  return createRouter()
    .openapi(
      route(
        {
          method: "post",
          path: "/nonce",
          operationId: "requestNonce",
          tags,
          summary: "Get a message for the wallet to sign",
          description:
            "Step 1 of sign-in. The message names the wallet, a one-time nonce and the time; sign it with the wallet's key and send it to /auth/verify before expiresAt. Limited per client address.",
          request: { body: jsonBody(NonceRequest) },
          responses: { 200: json(NonceResponse, "The message to sign and when it expires") },
        },
        { errors: ["INVALID_WALLET_ADDRESS", "RATE_LIMITED"] },
      ),
      async (c) => c.json(await deps.auth.nonce(c.req.valid("json").walletAddress), 200),
    )
    .openapi(
      route(
        {
          method: "post",
          path: "/verify",
          operationId: "verifySignature",
          tags,
          summary: "Exchange a signed message for tokens",
          description: "A first-time wallet creates its user.",
          request: { body: jsonBody(VerifyRequest) },
          responses: { 200: json(VerifyResponse, "The user and a token pair") },
        },
        { errors: ["INVALID_WALLET_ADDRESS", "NONCE_EXPIRED", "NONCE_NOT_FOUND", "INVALID_SIGNATURE", "RATE_LIMITED"] },
      ),
      async (c) => {
        const body = c.req.valid("json");
        const { user, ...tokens } = await deps.auth.verify(body.walletAddress, body.signature, body.message);
        return c.json({ user: presentUser(user), ...tokens }, 200);
      },
    )
    .openapi(
      route(
        {
          method: "post",
          path: "/refresh",
          operationId: "refreshTokens",
          tags,
          summary: "Rotate the refresh token for a new pair",
          description:
            "A refresh token works once: the pair answered replaces it, and sending it again is INVALID_REFRESH_TOKEN and revokes the whole session as stolen (every token of its sign-in, and the streams and exec sessions they opened end). Limited per client address.",
          request: { body: jsonBody(RefreshRequest) },
          responses: { 200: json(TokenPair, "A new token pair; the old refresh token no longer works") },
        },
        { errors: ["INVALID_REFRESH_TOKEN", "RATE_LIMITED"] },
      ),
      async (c) => c.json(await deps.auth.refresh(c.req.valid("json").refreshToken), 200),
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/me",
          operationId: "getMe",
          tags,
          summary: "The signed-in user",
          description: "Who the bearer token belongs to.",
          responses: { 200: json(MeResponse, "The user of the bearer token") },
        },
        { auth: true },
      ),
      (c) => c.json({ user: presentUser(c.get("user")) }, 200),
    )
    .openapi(
      route(
        {
          method: "post",
          path: "/logout",
          operationId: "logout",
          tags,
          summary: "Sign out: revoke a session",
          description:
            "Revokes the refresh token's whole family: every access and refresh token issued since that sign-in stops working at once, and the logs and events streams and exec sessions opened with them end (with UNAUTHORIZED; on another replica within REVOCATION_CHECK_MS). Any refresh token of the session will do, a spent one too. Other sign-ins of the same wallet are other sessions and go on.",
          request: { body: jsonBody(LogoutRequest) },
          responses: { 200: json(LogoutResponse, "The session is revoked") },
        },
        { errors: ["INVALID_REFRESH_TOKEN"] },
      ),
      async (c) => {
        await deps.auth.logout(c.req.valid("json").refreshToken);
        return c.json({ success: true, message: "signed out: this session's tokens no longer work" }, 200);
      },
    )
    .openapi(
      route(
        {
          method: "post",
          path: "/api-keys",
          operationId: "createApiKey",
          tags,
          summary: "Create an API key for a script",
          description:
            "Answers the key (cmk_...) this once: it is stored only as its SHA-256. Send it as 'Authorization: Bearer <key>' on any route its scopes allow (each operation's x-scope); other routes answer 403 INSUFFICIENT_SCOPE. A key works until deleted or until expiresInS has passed; signing out does not end it; its requests count against the account's limits as the wallet's do. Only a signed-in wallet session may create, list and delete keys.",
          request: { body: jsonBody(CreateApiKeyRequest) },
          responses: { 201: json(CreateApiKeyResponse, "The key, shown once, and its description") },
        },
        { auth: true, errors: ["API_KEY_QUOTA_EXCEEDED"] },
      ),
      async (c) => {
        const { row, key } = await deps.auth.apiKeys.create(c.get("user").id, c.req.valid("json"));
        // What an audit needs (who, which key, what it may do), by the key's id and shown prefix: never the key.
        c.get("log").info("API key created", { userId: row.userId, keyId: row.id, prefix: row.prefix, scopes: row.scopes, expiresAt: row.expiresAt });
        return c.json({ apiKey: presentApiKey(row), key }, 201);
      },
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/api-keys",
          operationId: "listApiKeys",
          tags,
          summary: "Your API keys",
          description:
            "Each key's name, first characters, scopes, and when it was created, last used (to the minute) and expires; never the key. Expired keys are listed until deleted.",
          responses: { 200: json(ApiKeyListResponse, "Your keys, oldest first") },
        },
        { auth: true },
      ),
      async (c) => c.json({ apiKeys: (await deps.auth.apiKeys.list(c.get("user").id)).map(presentApiKey) }, 200),
    )
    .openapi(
      route(
        {
          method: "delete",
          path: "/api-keys/{id}",
          operationId: "deleteApiKey",
          tags,
          summary: "Delete an API key",
          description:
            "The key is refused from the next request on, on every replica (each request reads the key's row: nothing is cached); the log streams, exec sessions and TCP connections it opened end at once on this replica and within REVOCATION_CHECK_MS on another.",
          request: { params: IdParams },
          responses: { 200: json(SuccessResponse, "The key is deleted") },
        },
        { auth: true, errors: ["API_KEY_NOT_FOUND"] },
      ),
      async (c) => {
        await deps.auth.apiKeys.remove(c.req.valid("param").id, c.get("user").id);
        c.get("log").info("API key deleted", { userId: c.get("user").id, keyId: c.req.valid("param").id });
        return c.json({ success: true, message: "deleted: the key no longer works" }, 200);
      },
    );
}
