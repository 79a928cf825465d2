import { type EarningRow, microToCredits, type Repos } from "@cm/db";
import type { Earnings, EarningTransaction } from "@cm/protocol";
import type { Clock } from "./ids";

const HOUR_MS = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();

type Sums = { usageMicro: number; feeMicro: number; refundedMicro: number; earnedMicro: number };
const presentSums = (s: Sums) => ({
  usage: microToCredits(s.usageMicro),
  fee: microToCredits(s.feeMicro),
  refunded: microToCredits(s.refundedMicro),
  earned: microToCredits(s.earnedMicro),
});

/**
 * What an operator's machines earned, as the API shows it. The money itself
 * moves in the database's transactions (a charge in repos.billing.consume, a
 * refund in repos.earnings.refund); this only reads.
 */
export function createEarningsService({ repos, clock, feePercent, holdHours }: { repos: Repos; clock: Clock; feePercent: number; holdHours: number }) {
  const holdMs = holdHours * HOUR_MS;

  const presentRow = (r: EarningRow): EarningTransaction => ({
    id: r.id,
    type: r.type,
    amount: microToCredits(r.amountMicro),
    nodeId: r.nodeId,
    deploymentId: r.deploymentId,
    transactionId: r.creditTransactionId,
    createdAt: iso(r.createdAt),
    availableAt: iso(r.type === "usage" ? r.createdAt + holdMs : r.createdAt),
  });

  return {
    async summary(operatorId: string, days: number): Promise<Earnings> {
      const s = await repos.earnings.summary(operatorId, clock.now(), holdMs, days);
      return {
        pending: microToCredits(s.pendingMicro),
        // Earned = pending + available + payingOut + paidOut, to the micro-credit.
        available: microToCredits(s.availableMicro),
        payingOut: microToCredits(s.inFlightMicro),
        paidOut: microToCredits(s.paidMicro),
        holdHours,
        feePercent,
        byNode: s.byNode.map((n) => ({ nodeId: n.nodeId, ...presentSums(n) })),
        byDay: s.byDay.map((d) => ({ date: iso(d.dayStartMs).slice(0, 10), ...presentSums(d) })),
      };
    },

    async transactions(operatorId: string, page: number, limit: number) {
      const { rows, total } = await repos.earnings.list(operatorId, page, limit);
      return { transactions: rows.map(presentRow), total };
    },
  };
}
export type EarningsService = ReturnType<typeof createEarningsService>;
