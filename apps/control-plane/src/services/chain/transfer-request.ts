import { randomBytes } from "node:crypto";
import { microToCredits } from "@cm/db";
import bs58 from "bs58";

/**
 * Solana Pay transfer requests (github.com/solana-labs/solana-pay, SPEC.md): a
 * `solana:` URL any wallet can pay, a phone scanning it as a QR code included.
 * Written out rather than taken from @solana/pay's encodeURL: that package's index
 * loads @solana/spl-token (a warning on every start, see to-transfer-facts.ts) and
 * ~400 ms of modules. The tests hold this to encodeURL's output and parseURL's reading.
 */

export interface TransferRequest {
  /** The wallet to pay, base58: the owner of the token account that receives. */
  recipient: string;
  /** The SPL token's mint, base58. */
  splToken: string;
  amountBaseUnits: bigint;
  /** The mint's decimals: the URL's amount is in whole tokens. */
  decimals: number;
  /** A public key the payment names as a read-only account, by which it is found on chain. */
  reference: string;
  /** Who asks for the payment, as the wallet shows it. */
  label: string;
  /** What the payment is for, as the wallet shows it. */
  message: string;
}

/** A fresh reference. Nobody signs with it (it is only a key to look transactions up by), so 32 random bytes do. */
export function newReference(): string {
  return bs58.encode(randomBytes(32));
}

export function transferRequestUrl(r: TransferRequest): string {
  const url = new URL(`solana:${r.recipient}`);
  // The same order as encodeURL, so a URL can be compared with the library's.
  url.searchParams.append("amount", wholeTokens(r.amountBaseUnits, r.decimals));
  url.searchParams.append("spl-token", r.splToken);
  url.searchParams.append("reference", r.reference);
  url.searchParams.append("label", r.label);
  url.searchParams.append("message", r.message);
  return url.toString();
}

/** What a deposit row holds about its payment, and the words a wallet shows for it. */
export interface DepositPayment {
  id: string;
  treasuryWallet: string;
  stableMint: string;
  amountStableBase: number;
  stableDecimals: number;
  creditsMicro: number;
}

/** The transfer request that pays `deposit`, found by `reference`. */
export function depositTransferRequestUrl(deposit: DepositPayment, reference: string, label: string): string {
  const credits = microToCredits(deposit.creditsMicro);
  return transferRequestUrl({
    recipient: deposit.treasuryWallet,
    splToken: deposit.stableMint,
    amountBaseUnits: BigInt(deposit.amountStableBase),
    decimals: deposit.stableDecimals,
    reference,
    label,
    message: `${credits.toLocaleString("en-US")} credits (deposit ${deposit.id})`,
  });
}

/**
 * Base units as the spec's decimal amount: integer arithmetic, no float and no
 * exponent, trailing zeros dropped (10.500000 is "10.5", 10.000000 is "10").
 */
function wholeTokens(amountBaseUnits: bigint, decimals: number): string {
  const digits = amountBaseUnits.toString().padStart(decimals + 1, "0");
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, "");
  return fraction ? `${whole}.${fraction}` : whole;
}
