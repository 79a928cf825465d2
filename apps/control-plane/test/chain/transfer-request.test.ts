import { encodeURL, parseURL } from "@solana/pay";
import { PublicKey } from "@solana/web3.js";
import BigNumber from "bignumber.js";
import bs58 from "bs58";
import { describe, expect, it } from "vitest";
import { depositTransferRequestUrl, newReference, transferRequestUrl } from "../../src/services/chain/transfer-request";

// The URL is read by wallets we do not control: @solana/pay's own parser and encoder
// are the judges of what it must look like.

const treasury = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin";
const usdc = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";

describe("transferRequestUrl", () => {
  it.each([
    [10_000_000n, "10"],
    [12_500_000n, "12.5"],
    [1n, "0.000001"],
    [1_234_560_000n, "1234.56"],
    [123_456_789_012_345_678n, "123456789012.345678"],
  ])("%s base units: parseURL reads back every field, and the URL is the one encodeURL writes", (amountBaseUnits, amount) => {
    const reference = newReference();
    const fields = {
      recipient: treasury,
      splToken: usdc,
      amountBaseUnits,
      decimals: 6,
      reference,
      label: "Compute & Co",
      message: "1,000 credits (dépôt n°1)",
    };
    const url = transferRequestUrl(fields);

    const parsed = parseURL(url);
    if (!("recipient" in parsed)) throw new Error("parsed as a transaction request");
    expect(parsed.recipient.toBase58()).toBe(treasury);
    expect(parsed.splToken?.toBase58()).toBe(usdc);
    expect(parsed.amount?.toFixed()).toBe(amount);
    expect(parsed.reference?.map((r) => r.toBase58())).toEqual([reference]);
    expect(parsed.label).toBe(fields.label);
    expect(parsed.message).toBe(fields.message);
    expect(parsed.memo).toBeUndefined();

    const byLibrary = encodeURL({
      recipient: new PublicKey(treasury),
      amount: new BigNumber(amount),
      splToken: new PublicKey(usdc),
      reference: new PublicKey(reference),
      label: fields.label,
      message: fields.message,
    });
    expect(url).toBe(byLibrary.toString());
  });

  it("for a deposit: the deposit's treasury, mint and amount, the credits and the deposit's id in the message", () => {
    const reference = newReference();
    const deposit = { id: "dpst_01", treasuryWallet: treasury, stableMint: usdc, amountStableBase: 10_000_000, stableDecimals: 6, creditsMicro: 1_050_000_000 };
    const parsed = parseURL(depositTransferRequestUrl(deposit, reference, "Compute marketplace"));
    if (!("recipient" in parsed)) throw new Error("parsed as a transaction request");
    expect(parsed).toMatchObject({ label: "Compute marketplace", message: "1,050 credits (deposit dpst_01)" });
    expect(parsed.amount?.toFixed()).toBe("10");
    expect(parsed.recipient.toBase58()).toBe(treasury);
    expect(parsed.reference?.[0]?.toBase58()).toBe(reference);
  });
});

describe("newReference", () => {
  it("is a public key (32 bytes, base58), fresh each time", () => {
    const references = new Set(Array.from({ length: 100 }, newReference));
    expect(references.size).toBe(100);
    for (const reference of references) {
      expect(bs58.decode(reference)).toHaveLength(32);
      expect(new PublicKey(reference).toBase58()).toBe(reference);
    }
  });
});
