import { z } from "zod";
import { SuccessResponse, Timestamp, text } from "./common";

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
