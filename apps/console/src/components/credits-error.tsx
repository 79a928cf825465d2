import { CmError, type DepositState, DepositWaitError } from "@cm/sdk";
import { ErrorNotice } from "../layout/error-notice";

/** What to do next for the errors of buying credits, which the shared notice does not know. */
const NEXT: Record<string, string> = {
  TOO_MANY_OPEN_DEPOSITS: "Pay one of your open deposits, or wait until the oldest expires (at most 30 minutes), then start again.",
  DEPOSIT_EXPIRED: "Start a new purchase: a payment made after the deposit expired is not credited to it.",
  PAYMENT_AFTER_EXPIRY: "Start a new purchase: the payment landed after the deposit expired.",
  DEPOSIT_WALLET_MISMATCH: "Pay from the wallet you signed in with, or sign in with the wallet you want to pay from.",
  PAYER_MISMATCH: "Pay from the wallet you signed in with, or sign in with the wallet you want to pay from.",
  AMOUNT_TOO_LOW: "Pay the full amount shown: start a new purchase and pay it from the link or the QR code.",
  MINT_MISMATCH: "Pay in USDC: start a new purchase and pay it from the link or the QR code.",
  RECIPIENT_MISMATCH: "Pay the treasury the deposit names: start a new purchase and pay it from the link or the QR code.",
  TX_FAILED: "The payment failed on chain and nothing moved: check the wallet holds enough USDC and SOL for the fee, then try again.",
  TX_REJECTED: "Nothing was paid: check the wallet holds enough USDC (and SOL for the fee), then try again.",
  TX_NOT_CONFIRMED: "The payment may still land: this page keeps following the deposit, and a landed payment is credited by itself.",
  CHAIN_UNAVAILABLE: "The Solana RPC did not answer and nothing changed: try again in a minute.",
  CHAIN_LIBRARIES_MISSING: "Reload the page and try again, or pay by QR code.",
  WAIT_TIMEOUT: "A payment that lands later is still credited by itself: check the history below in a few minutes.",
  PACKAGE_NOT_FOUND: "Reload the page: the packages changed.",
};

/** A refused request, a refused payment or an expired deposit: the shared notice, with what to do next about buying credits. */
export function CreditsError({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  if (!error) return null;
  const code = error instanceof CmError ? error.code : undefined;
  const refusal = error instanceof DepositWaitError ? (error.deposit as DepositState | undefined)?.refusal?.code : undefined;
  return <ErrorNotice error={error} onRetry={onRetry} next={(refusal && NEXT[refusal]) || (code && NEXT[code]) || undefined} />;
}
