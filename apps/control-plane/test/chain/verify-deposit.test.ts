import { DEPOSIT_REFUSAL_CODES, ERROR_CODES } from "@cm/protocol";
import { describe, expect, it } from "vitest";
import type { TokenTransfer, TransferFacts } from "../../src/services/chain/chain-client";
import type { ExpectedDeposit } from "../../src/services/chain/verify-deposit";
import { verifyDeposit } from "../../src/services/chain/verify-deposit";

const USDC = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";
const OTHER_MINT = "Es9vMFrzaCERmJfrF4H2FYD4KCoNkY11McCe8BenwNYB";
const PAYER = "5vG75bmYbUyn4qoRc953JhgWeYfyfH8rnpMBsSBgoYGR";
const TREASURY = "DbCmoMW96nmiCQFhWShCTNk4UC1jQBhqwuTjcQcsSn1E";
const STRANGER = "FeZ12ysAUjFTspWXu5hBEEUjaNHhQh9jbdeqKiW17Amz";
const EXPIRES_MS = Date.UTC(2025, 5, 1, 12, 30);

const expected: ExpectedDeposit = { treasuryOwner: TREASURY, mint: USDC, amountBaseUnits: 25_000_000n, payer: PAYER, notAfterMs: EXPIRES_MS };

function transfer(overrides: Partial<TokenTransfer> = {}): TokenTransfer {
  return {
    mint: USDC,
    source: "payer-ata",
    destination: "treasury-ata",
    destinationOwner: TREASURY,
    authority: PAYER,
    amountBaseUnits: 25_000_000n,
    decimals: 6,
    ...overrides,
  };
}

/** Facts of a payment whose treasury balance moved exactly as its transfers say. */
function facts(transfers: TokenTransfer[], overrides: Partial<TransferFacts> = {}): TransferFacts {
  return {
    signature: "sig",
    slot: 1,
    blockTimeMs: EXPIRES_MS - 60_000,
    failed: false,
    transfers,
    tokenBalanceDeltas: transfers.map((t, i) => ({
      account: t.destination,
      accountIndex: i + 1,
      owner: t.destinationOwner,
      mint: t.mint,
      deltaBaseUnits: t.amountBaseUnits,
      decimals: t.decimals,
    })),
    accountKeys: [],
    ...overrides,
  };
}

const refusal = (code: string) => expect.objectContaining({ ok: false, code, message: expect.any(String) });

describe("verifyDeposit", () => {
  it("accepts the exact amount, and an overpayment in full", () => {
    expect(verifyDeposit(facts([transfer()]), expected)).toEqual({ ok: true, receivedBaseUnits: 25_000_000n });
    expect(verifyDeposit(facts([transfer({ amountBaseUnits: 30_000_000n })]), expected)).toEqual({ ok: true, receivedBaseUnits: 30_000_000n });
  });

  it("refuses a failed transaction before anything else", () => {
    expect(verifyDeposit(facts([transfer()], { failed: true }), expected)).toEqual(refusal("TX_FAILED"));
  });

  it("refuses a payment in another token", () => {
    expect(verifyDeposit(facts([transfer({ mint: OTHER_MINT })]), expected)).toEqual(refusal("MINT_MISMATCH"));
    expect(verifyDeposit(facts([transfer({ mint: OTHER_MINT, destinationOwner: STRANGER })]), expected)).toEqual(refusal("MINT_MISMATCH"));
    expect(verifyDeposit(facts([]), expected)).toEqual(refusal("MINT_MISMATCH"));
  });

  it("refuses the right token sent to someone else", () => {
    const verdict = verifyDeposit(facts([transfer({ destinationOwner: STRANGER })]), expected);
    expect(verdict).toEqual(refusal("RECIPIENT_MISMATCH"));
    expect(verdict.ok || verdict.message).toContain(STRANGER);
  });

  it("refuses another wallet's payment", () => {
    expect(verifyDeposit(facts([transfer({ authority: STRANGER })]), expected)).toEqual(refusal("PAYER_MISMATCH"));
  });

  it("refuses a short amount, naming both in base units", () => {
    const verdict = verifyDeposit(facts([transfer({ amountBaseUnits: 24_999_999n })]), expected);
    expect(verdict).toEqual(refusal("AMOUNT_TOO_LOW"));
    expect(verdict.ok || verdict.message).toBe("The treasury received 24999999 base units from the payer; the deposit needs 25000000.");
  });

  it("credits what actually landed when the treasury grew by less than was sent", () => {
    const sent = facts([transfer()]);
    const landed = { ...sent, tokenBalanceDeltas: sent.tokenBalanceDeltas.map((d) => ({ ...d, deltaBaseUnits: 24_900_000n })) };
    expect(verifyDeposit(landed, expected)).toEqual(refusal("AMOUNT_TOO_LOW"));
  });

  it("does not credit the payer with another signer's money in the same transaction", () => {
    const split = facts([transfer({ amountBaseUnits: 5_000_000n }), transfer({ amountBaseUnits: 20_000_000n, authority: STRANGER })]);
    expect(verifyDeposit(split, expected)).toEqual(refusal("AMOUNT_TOO_LOW"));
    expect(verifyDeposit(split, { ...expected, amountBaseUnits: 5_000_000n })).toEqual({ ok: true, receivedBaseUnits: 5_000_000n });
  });

  it("refuses a transfer the balances do not back up", () => {
    expect(verifyDeposit(facts([transfer()], { tokenBalanceDeltas: [] }), expected)).toEqual(refusal("AMOUNT_TOO_LOW"));
  });

  it("refuses a payment that landed after the deposit expired, up to the millisecond", () => {
    expect(verifyDeposit(facts([transfer()], { blockTimeMs: EXPIRES_MS + 1_000 }), expected)).toEqual(refusal("PAYMENT_AFTER_EXPIRY"));
    expect(verifyDeposit(facts([transfer()], { blockTimeMs: EXPIRES_MS }), expected).ok).toBe(true);
    expect(verifyDeposit(facts([transfer()], { blockTimeMs: null }), expected).ok).toBe(true);
  });

  it("lists every code once, each an API error code with a description", () => {
    const codes = [...DEPOSIT_REFUSAL_CODES];
    expect(new Set(codes).size).toBe(codes.length);
    expect(codes).toEqual(["TX_FAILED", "MINT_MISMATCH", "RECIPIENT_MISMATCH", "AMOUNT_TOO_LOW", "PAYER_MISMATCH", "PAYMENT_AFTER_EXPIRY"]);
    for (const code of DEPOSIT_REFUSAL_CODES) expect(ERROR_CODES[code].description.length).toBeGreaterThan(10);
  });
});
