import { z } from "zod";
import type { ErrorCode } from "../errors";
import { Pagination, pageQuery, Timestamp, text } from "./common";

export const Balance = z
  .object({
    available: z.number().meta({ description: "credits you can spend (1 credit = 1 US cent)" }),
    reserved: z.number().meta({ description: "credits held for running deployments" }),
    totalUsed: z.number().meta({ description: "credits spent on usage, all time" }),
  })
  .meta({ id: "Balance" });
export type Balance = z.infer<typeof Balance>;

export const CreditPackage = z
  .object({
    id: z.string(),
    name: z.string(),
    credits: z.number(),
    priceUsd: z.number(),
    priceStable: z.number(),
    bonusPercent: z.number(),
    creditsToReceive: z.number(),
  })
  .meta({ id: "CreditPackage" });

export const Deposit = z
  .object({
    depositId: z.string(),
    amountStable: z.number(),
    creditsToReceive: z.number(),
    treasuryWallet: z.string(),
    stableMint: z.string(),
    expiresAt: Timestamp,
    reference: z.string().meta({ description: "a public key the payment names (Solana Pay reference), by which the control plane finds it on chain" }),
    transferRequestUrl: z.string().meta({
      description:
        "a Solana Pay transfer request (solana:<treasuryWallet>?amount&spl-token&reference&label&message) any wallet can pay, as a link or a QR code",
    }),
  })
  .meta({ id: "Deposit" });

/** Why a landed transaction does not pay for a deposit: each is also the error code the confirm answers, described in ERROR_CODES. */
export const DEPOSIT_REFUSAL_CODES = [
  "TX_FAILED",
  "MINT_MISMATCH",
  "RECIPIENT_MISMATCH",
  "AMOUNT_TOO_LOW",
  "PAYER_MISMATCH",
  "PAYMENT_AFTER_EXPIRY",
] as const satisfies readonly ErrorCode[];
export type DepositRefusalCode = (typeof DEPOSIT_REFUSAL_CODES)[number];

export const DepositRefusal = z
  .object({
    code: z.enum(DEPOSIT_REFUSAL_CODES),
    message: z.string().meta({ description: "what the code means (its description among the API's error codes)" }),
    txSignature: z.string().meta({ description: "the refused transaction" }),
  })
  .meta({
    id: "DepositRefusal",
    description:
      "The latest payment found for a deposit that did not pay it (found by its reference, or named to confirm): e.g. PAYMENT_AFTER_EXPIRY for one whose block time is after expiresAt. Absent once the deposit is confirmed: a valid payment still credits a deposit that has a refusal while the deposit is open.",
  });
export type DepositRefusal = z.infer<typeof DepositRefusal>;

/** pending: awaiting its payment; confirmed: credited; expired: past expiresAt without a payment credited. */
export const DEPOSIT_STATES = ["pending", "confirmed", "expired"] as const;
export const DepositState = z
  .object({
    depositId: z.string(),
    status: z.enum(DEPOSIT_STATES),
    amountStable: z.number(),
    creditsToReceive: z.number(),
    treasuryWallet: z.string(),
    stableMint: z.string(),
    expiresAt: Timestamp,
    reference: z.string().optional().meta({ description: "the Solana Pay reference the payment names; absent on deposits made before references" }),
    transferRequestUrl: z.string().optional().meta({ description: "the Solana Pay transfer request that pays it, while pending" }),
    txSignature: z.string().optional().meta({ description: "the transaction that paid it, once confirmed" }),
    confirmedAt: Timestamp.optional(),
    refusal: DepositRefusal.optional().meta({ description: "why a payment found for it was not credited, while it is not confirmed" }),
  })
  .meta({ id: "DepositState" });
export type DepositState = z.infer<typeof DepositState>;

export const TRANSACTION_TYPES = ["deposit", "usage", "refund"] as const;
export const CreditTransaction = z
  .object({
    id: z.string(),
    type: z.enum(TRANSACTION_TYPES),
    amount: z.number(),
    description: z.string(),
    txSignature: z.string().optional(),
    deploymentId: z.string().optional(),
    createdAt: Timestamp,
  })
  .meta({ id: "CreditTransaction" });

export const BalanceResponse = z.object({ balance: Balance });
export const PackagesResponse = z.object({ packages: z.array(CreditPackage) });
export const InitiateDepositRequest = z.strictObject({ packageId: text().min(1).max(64), walletAddress: text().max(64) });
export const InitiateDepositResponse = z.object({ deposit: Deposit });
export const ConfirmDepositRequest = z.strictObject({
  depositId: text().min(1).max(64),
  txSignature: z.string().regex(/^[1-9A-HJ-NP-Za-km-z]{64,90}$/, "must be a base58 transaction signature"),
});
export const DepositStateResponse = z.object({ deposit: DepositState });
export const ConfirmDepositResponse = z.object({ transaction: CreditTransaction, newBalance: Balance });
export const TransactionListQuery = z.strictObject({ type: z.enum(TRANSACTION_TYPES).optional(), ...pageQuery(100) });
export const TransactionListResponse = z.object({ transactions: z.array(CreditTransaction), pagination: Pagination });
