import { creditsToMicro, microToCredits, type PayoutRow, type Repos } from "@cm/db";
import type { Payout } from "@cm/protocol";
import { ApiError } from "../errors";
import { baseUnitsToTokens, centsToBaseUnits } from "./deposit-service";
import type { Clock, IdGenerator } from "./ids";
import { WAITING_FOR_APPROVAL } from "./payout-sender";

const HOUR_MS = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();

export type PayoutSettings = {
  /** false without PAYOUT_KEYPAIR: requests are refused, nothing is queued that could never be sent. */
  enabled: boolean;
  mode: "manual" | "auto";
  /** PAYOUTS=auto: a request above it could never be approved (and would hold up every one behind it). */
  dailyLimitCredits: number;
  minCredits: number;
  holdHours: number;
  stableMint: string;
  stableDecimals: number;
};

export function presentPayout(p: PayoutRow): Payout {
  return {
    id: p.id,
    status: p.status,
    amountCredits: microToCredits(p.amountMicro),
    amountStable: baseUnitsToTokens(BigInt(p.amountStableBase), p.stableDecimals),
    stableMint: p.stableMint,
    walletAddress: p.walletAddress,
    ...(p.signature ? { txSignature: p.signature } : {}),
    ...(p.error ? { error: p.error } : {}),
    requestedAt: iso(p.requestedAt),
    ...(p.approvedAt !== null ? { approvedAt: iso(p.approvedAt) } : {}),
    ...(p.paidAt !== null ? { paidAt: iso(p.paidAt) } : {}),
  };
}

/**
 * Operators' withdrawals as the API sees them: a request takes credits out of
 * available earnings at once (so they cannot be spent twice); the sender
 * (payout-sender.ts) moves the USDC.
 */
export function createPayoutService(repos: Repos, clock: Clock, ids: IdGenerator, s: PayoutSettings, onRequested: (p: PayoutRow) => void) {
  return {
    async request(user: { id: string; walletAddress: string }, amountCredits: number): Promise<Payout> {
      if (!s.enabled) throw new ApiError("PAYOUTS_NOT_CONFIGURED");
      if (amountCredits < s.minCredits) {
        throw new ApiError("PAYOUT_BELOW_MINIMUM", `a payout is at least ${s.minCredits} credits (PAYOUT_MIN_CREDITS); you asked for ${amountCredits}`, {
          minimumCredits: s.minCredits,
        });
      }
      if (s.mode === "auto" && amountCredits > s.dailyLimitCredits) {
        throw new ApiError(
          "PAYOUT_ABOVE_DAILY_LIMIT",
          `this installation pays out at most ${s.dailyLimitCredits} credits a day (PAYOUT_DAILY_LIMIT_CREDITS); ask for that much or less at a time`,
          { dailyLimitCredits: s.dailyLimitCredits },
        );
      }
      const nowMs = clock.now();
      const outcome = await repos.payouts.request(
        {
          id: ids("pay"),
          operatorId: user.id,
          amountMicro: creditsToMicro(amountCredits),
          // 1 credit = 1 US cent, paid 1:1 in the stablecoin.
          amountStableBase: Number(centsToBaseUnits(amountCredits, s.stableDecimals)),
          stableMint: s.stableMint,
          stableDecimals: s.stableDecimals,
          walletAddress: user.walletAddress,
          requestedAt: nowMs,
          ...(s.mode === "manual" ? { error: WAITING_FOR_APPROVAL } : {}),
        },
        s.holdHours * HOUR_MS,
      );
      if (!outcome.ok) {
        const availableCredits = microToCredits(outcome.availableMicro);
        throw new ApiError("INSUFFICIENT_EARNINGS", `you asked for ${amountCredits} credits and ${availableCredits} are available to pay out`, {
          availableCredits,
        });
      }
      onRequested(outcome.payout);
      return presentPayout(outcome.payout);
    },

    async get(id: string, operatorId: string): Promise<Payout> {
      const row = await repos.payouts.get(id, operatorId);
      if (!row) throw new ApiError("PAYOUT_NOT_FOUND");
      return presentPayout(row);
    },

    async list(operatorId: string, page: number, limit: number) {
      const { rows, total } = await repos.payouts.list(operatorId, page, limit);
      return { payouts: rows.map(presentPayout), total };
    },
  };
}
export type PayoutService = ReturnType<typeof createPayoutService>;
