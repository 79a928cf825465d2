import { LogoutRequest, LogoutResponse, MeResponse, NonceRequest, NonceResponse, RefreshRequest, TokenPair, VerifyRequest, VerifyResponse } from "@cm/protocol";
import type { Deps } from "../deps";
import { presentUser } from "../http/presenters";
import { createRouter, json, jsonBody, type RouteFactory } from "../http/route";

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
    );
}
