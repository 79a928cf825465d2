import { z } from "zod";
import { Pagination, pageQuery, Timestamp } from "./common";

/**
 * A payout's life: `requested` (waiting for an administrator under
 * PAYOUTS=manual, or for the daily limit under PAYOUTS=auto), `sending` (a
 * signed transfer exists and is being sent or confirmed), then `paid` or
 * `failed` (nothing moved; the amount is available again).
 */
export const PAYOUT_STATUSES = ["requested", "sending", "paid", "failed"] as const;
export type PayoutStatus = (typeof PAYOUT_STATUSES)[number];

export const Payout = z
  .object({
    id: z.string(),
    status: z.enum(PAYOUT_STATUSES),
    amountCredits: z.number().meta({ description: "credits taken from your available earnings (1 credit = 1 US cent)" }),
    amountStable: z.number().meta({ description: "what your wallet receives, in whole tokens (USDC)" }),
    stableMint: z.string(),
    walletAddress: z.string().meta({ description: "the wallet paid: the one you sign in with" }),
    txSignature: z.string().optional().meta({ description: "the transfer's signature, once one is signed; the one that landed once paid" }),
    error: z.string().optional().meta({
      description:
        "failed: why. Requested or sending: what it waits for (an administrator's approval, the daily limit's room) or what delays it (the Solana RPC, a refused send); gone once it is paid",
    }),
    requestedAt: Timestamp,
    approvedAt: Timestamp.optional(),
    paidAt: Timestamp.optional(),
  })
  .meta({ id: "Payout" });
export type Payout = z.infer<typeof Payout>;

export const PayoutRequest = z
  .strictObject({
    amountCredits: z
      .number()
      .int()
      .min(1)
      .max(Number.MAX_SAFE_INTEGER / 1_000_000)
      .meta({ description: "whole credits, at least PAYOUT_MIN_CREDITS (2,000 by default) and at most your available earnings" }),
  })
  .meta({ id: "PayoutRequest" });
export const PayoutResponse = z.object({ payout: Payout });
export const PayoutListQuery = z.strictObject({ ...pageQuery(100) });
export const PayoutListResponse = z.object({ payouts: z.array(Payout), pagination: Pagination });
