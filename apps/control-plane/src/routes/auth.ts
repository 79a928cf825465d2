import { MeResponse, NonceRequest, NonceResponse, RefreshRequest, TokenPair, VerifyRequest, VerifyResponse } from "@cm/protocol";
import type { ApiRouter } from "../http/api-router";
import { presentUser } from "../http/presenters";
import type { Deps } from "../deps";

export function authRoutes(api: ApiRouter, deps: Deps) {
  const tag = "auth";
  api.post("/auth/nonce", { tag, summary: "Get a message for the wallet to sign", body: NonceRequest, response: NonceResponse, errors: ["INVALID_WALLET_ADDRESS", "RATE_LIMITED"] }, async (c, { body }) =>
    c.json(await deps.auth.nonce(body.walletAddress)),
  );

  api.post(
    "/auth/verify",
    { tag, summary: "Exchange a signed message for tokens", description: "A first-time wallet creates its user.", body: VerifyRequest, response: VerifyResponse, errors: ["INVALID_WALLET_ADDRESS", "NONCE_EXPIRED", "NONCE_NOT_FOUND", "INVALID_SIGNATURE", "RATE_LIMITED"] },
    async (c, { body }) => {
      const { user, ...tokens } = await deps.auth.verify(body.walletAddress, body.signature, body.message);
      return c.json({ user: presentUser(user), ...tokens });
    },
  );

  api.post("/auth/refresh", { tag, summary: "Rotate the refresh token for a new pair", body: RefreshRequest, response: TokenPair, errors: ["INVALID_REFRESH_TOKEN", "RATE_LIMITED"] }, async (c, { body }) =>
    c.json(await deps.auth.refresh(body.refreshToken)),
  );

  api.get("/auth/me", { tag, summary: "The signed-in user", auth: true, response: MeResponse }, async (c) => c.json({ user: presentUser(c.get("user")) }));
}
