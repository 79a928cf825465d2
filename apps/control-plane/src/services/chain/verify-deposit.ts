import type { DepositRefusalCode } from "@cm/protocol";
import type { TokenTransfer, TransferFacts } from "./chain-client";

export interface ExpectedDeposit {
  /** Treasury wallet (owner of its token accounts), base58. */
  treasuryOwner: string;
  /** Token mint, base58 (USDC on mainnet: EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v). */
  mint: string;
  amountBaseUnits: bigint;
  /** Wallet that must have signed the transfer, base58. */
  payer: string;
  /** The deposit's expiry, ms since the epoch. */
  notAfterMs: number;
}

export type DepositVerdict = { ok: true; receivedBaseUnits: bigint } | { ok: false; code: DepositRefusalCode; message: string };

/**
 * Decides whether a landed transaction pays for a deposit. Pure. Credit needs two
 * independent proofs: the treasury's balance grew (what the runtime did) and a
 * transfer signed by the payer went to the treasury (who did it).
 *
 * A null blockTimeMs passes the expiry check: it means "unknown", and refusing a
 * real payment over a missing timestamp would strand the tenant's money.
 */
export function verifyDeposit(facts: TransferFacts, expected: ExpectedDeposit): DepositVerdict {
  if (facts.failed) return refuse("TX_FAILED", "The transaction failed on chain; no tokens moved.");
  if (facts.blockTimeMs !== null && facts.blockTimeMs > expected.notAfterMs) {
    const landedAt = new Date(facts.blockTimeMs).toISOString();
    const expiredAt = new Date(expected.notAfterMs).toISOString();
    return refuse("PAYMENT_AFTER_EXPIRY", `The payment landed at ${landedAt}, after the deposit expired at ${expiredAt}.`);
  }

  const toTreasury = (t: TokenTransfer) => t.destinationOwner === expected.treasuryOwner;
  const ofMint = (t: TokenTransfer) => t.mint === expected.mint;
  const payments = facts.transfers.filter((t) => toTreasury(t) && ofMint(t));
  if (payments.length === 0) return explainMissingPayment(facts.transfers, toTreasury, ofMint, expected.mint);

  const paymentsByPayer = payments.filter((t) => t.authority === expected.payer);
  if (paymentsByPayer.length === 0) {
    const authorities = [...new Set(payments.map((t) => t.authority))].join(", ");
    return refuse("PAYER_MISMATCH", `The transfer to the treasury was signed by ${authorities}, not by ${expected.payer}.`);
  }

  const sentByPayer = paymentsByPayer.reduce((sum, t) => sum + t.amountBaseUnits, 0n);
  const treasuryGrowth = facts.tokenBalanceDeltas
    .filter((d) => d.owner === expected.treasuryOwner && d.mint === expected.mint)
    .reduce((sum, d) => sum + d.deltaBaseUnits, 0n);
  // The smaller of the two: a fee-charging mint lands less than was sent, and money from
  // other signers in the same transaction is not the payer's.
  const receivedBaseUnits = sentByPayer < treasuryGrowth ? sentByPayer : treasuryGrowth;
  if (receivedBaseUnits < expected.amountBaseUnits) {
    return refuse("AMOUNT_TOO_LOW", `The treasury received ${receivedBaseUnits} base units from the payer; the deposit needs ${expected.amountBaseUnits}.`);
  }
  return { ok: true, receivedBaseUnits };
}

function explainMissingPayment(
  transfers: TokenTransfer[],
  toTreasury: (t: TokenTransfer) => boolean,
  ofMint: (t: TokenTransfer) => boolean,
  mint: string,
): DepositVerdict {
  const wrongMintToTreasury = transfers.find(toTreasury);
  if (wrongMintToTreasury) {
    return refuse("MINT_MISMATCH", `The treasury was paid in mint ${wrongMintToTreasury.mint}, not ${mint}.`);
  }
  const rightMintElsewhere = transfers.find(ofMint);
  if (rightMintElsewhere) {
    const to = rightMintElsewhere.destinationOwner ?? rightMintElsewhere.destination;
    return refuse("RECIPIENT_MISMATCH", `The tokens went to ${to}, not to the treasury.`);
  }
  const otherToken = transfers[0];
  if (otherToken) return refuse("MINT_MISMATCH", `The transaction moved mint ${otherToken.mint}, not ${mint}.`);
  return refuse("MINT_MISMATCH", `The transaction holds no token transfer of mint ${mint}.`);
}

function refuse(code: DepositRefusalCode, message: string): DepositVerdict {
  return { ok: false, code, message };
}
