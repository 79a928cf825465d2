import type { Repos } from "@cm/db";

/**
 * The ledger's invariants over every account, read from the database: what any
 * scenario (a crash, an outage, a race) must leave true. Each one broken is
 * named with its two sides; none broken is `[]`. Without vitest, so a
 * benchmark (bench/replica-metering.ts) checks the same books a test does.
 */
export async function wholeBooks(repos: Repos) {
  const broken: string[] = [];
  const same = (what: string, left: number, right: number) => left !== right && broken.push(`${what}: ${left} != ${right}`);
  const totals = await repos.ledger.totals();
  // Every credit that entered a balance is a credited deposit or an admin grant, each once.
  same("deposit rows = confirmed deposits + grants", totals.depositsMicro, totals.creditedDepositsMicro + totals.grantsMicro);
  // deposits = tenants' balances + usage - refunds: nothing enters or leaves a balance but through the ledger.
  same("deposits = balances + usage - refunds", totals.depositsMicro, totals.balancesMicro + totals.usageMicro - totals.refundsMicro);
  // Every charge went to an operator and the platform's fee, to the micro-credit.
  const books = await repos.earnings.books();
  same("usage - refunds = earnings + fees", books.usageMicro - books.refundsMicro, books.operatorMicro + books.platformMicro);
  // earnings = pending + available + payouts in flight + paid, with available never below zero: no operator was paid (or is being paid) more than they earned.
  const paid = await repos.payouts.books();
  if (books.operatorMicro < paid.inFlightMicro + paid.paidMicro)
    broken.push(`operators' earnings cover their payouts: ${books.operatorMicro} < ${paid.inFlightMicro + paid.paidMicro}`);
  const overdrawn = await repos.payouts.overdrawn();
  if (overdrawn.length > 0) broken.push(`operators paid out more than they earned: ${JSON.stringify(overdrawn)}`);
  // What an operator keeps of a deployment (their earnings on it less the refunds taken from them) never exceeds what it
  // was charged less its refunds, but for what a refund could not take back because it was sending or paid out.
  const overkept = await repos.earnings.overkept();
  if (overkept.length > 0) broken.push(`operators keep more of deployments than they were charged less refunds: ${JSON.stringify(overkept)}`);
  return { totals, broken };
}
