import { z } from "zod";
import { Pagination, pageQuery, queryInteger, Timestamp } from "./common";

/** What moved an operator's earnings: a tenant's usage charge, or a refund taking part of one back. */
export const EARNING_TYPES = ["usage", "refund"] as const;

const credits = (description: string) => z.number().meta({ description });
const breakdown = {
  usage: credits("what tenants were charged on your machines, the platform's fee included"),
  fee: credits("the platform's part of that usage (PLATFORM_FEE_PERCENT)"),
  refunded: credits("what refunds took back from your earnings"),
  earned: credits("usage less the fee and refunds: what you earned"),
};

export const NodeEarnings = z.object({ nodeId: z.string(), ...breakdown }).meta({ id: "NodeEarnings" });
export const DayEarnings = z.object({ date: z.string().meta({ description: "the UTC day, YYYY-MM-DD" }), ...breakdown }).meta({ id: "DayEarnings" });

export const Earnings = z
  .object({
    pending: credits("earned within the last EARNINGS_HOLD_HOURS (24 by default), held in full: refunds come out of available first"),
    available: credits("earned before the hold and not yet paid out or paying out: yours to request a payout of"),
    payingOut: credits("in payouts requested or being sent: no longer available, not yet paid"),
    paidOut: credits("paid out to your wallet, all time; pending + available + payingOut + paidOut is everything you earned"),
    holdHours: z.number().int().meta({ description: "how long earnings stay pending" }),
    feePercent: z.number().int().meta({ description: "the platform's share of each usage charge" }),
    byNode: z.array(NodeEarnings).meta({ description: "every node that ever earned, all time" }),
    byDay: z.array(DayEarnings).meta({ description: "the last `days` UTC days that had any earnings, newest first" }),
  })
  .meta({ id: "Earnings" });
export type Earnings = z.infer<typeof Earnings>;

export const EarningsQuery = z.strictObject({
  days: queryInteger(z.number().int().min(1).max(366))
    .default(30)
    .meta({ description: "how many UTC days byDay covers, today included; default 30, at most 366" }),
});
export const EarningsResponse = z.object({ earnings: Earnings });

export const EarningTransaction = z
  .object({
    id: z.string(),
    type: z.enum(EARNING_TYPES),
    amount: credits("credits: positive for your part of a usage charge, negative for a refund"),
    nodeId: z.string(),
    deploymentId: z.string(),
    transactionId: z.string().meta({ description: "the tenant's ledger row it comes from" }),
    createdAt: Timestamp,
    availableAt: Timestamp.meta({ description: "when a usage row's hold ends" }),
  })
  .meta({ id: "EarningTransaction" });
export type EarningTransaction = z.infer<typeof EarningTransaction>;
export const EarningTransactionListQuery = z.strictObject({ ...pageQuery(100) });
export const EarningTransactionListResponse = z.object({ transactions: z.array(EarningTransaction), pagination: Pagination });
