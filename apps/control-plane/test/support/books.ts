import type { Repos } from "@cm/db";
import { expect } from "vitest";

/**
 * The ledger's invariants over every account, read from the database: what any
 * scenario (a crash, an outage, a race) must leave true. The per-tenant ones
 * (balance = sum of rows, holds add up) are the callers'.
 */
export async function checkWholeBooks(repos: Repos) {
  const totals = await repos.ledger.totals();
  // Every credit that entered a balance is a credited deposit or an admin grant, each once.
  expect(totals.depositsMicro, "deposit rows = confirmed deposits + grants").toBe(totals.creditedDepositsMicro + totals.grantsMicro);
  // deposits = tenants' balances + usage - refunds: nothing enters or leaves a balance but through the ledger.
  expect(totals.depositsMicro, "deposits = balances + usage - refunds").toBe(totals.balancesMicro + totals.usageMicro - totals.refundsMicro);
  // Every charge went to an operator and the platform's fee, to the micro-credit.
  const books = await repos.earnings.books();
  expect(books.usageMicro - books.refundsMicro, "usage - refunds = earnings + fees").toBe(books.operatorMicro + books.platformMicro);
  // earnings = pending + available + payouts in flight + paid, with available never below zero: no operator was paid (or is being paid) more than they earned.
  const paid = await repos.payouts.books();
  expect(books.operatorMicro, "operators' earnings cover their payouts").toBeGreaterThanOrEqual(paid.inFlightMicro + paid.paidMicro);
  expect(await repos.payouts.overdrawn(), "operators paid out more than they earned").toEqual([]);
  // What an operator keeps of a deployment (their earnings on it less the refunds taken from them) never exceeds what it
  // was charged less its refunds, but for what a refund could not take back because it was sending or paid out.
  expect(await repos.earnings.overkept(), "operators keep more of deployments than they were charged less refunds").toEqual([]);
  return totals;
}
