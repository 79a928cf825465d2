import type { DepositRefusalCode } from "@cm/protocol";
import type { ChainClient, TransferFacts } from "./chain-client";
import { type ExpectedDeposit, verifyDeposit } from "./verify-deposit";

/**
 * Finds the payment for a deposit by its Solana Pay reference, with the checks the
 * explicit confirm makes (verifyDeposit). What it cannot know is whether another
 * deposit already used the signature: the caller's database says that when it credits.
 */

export type ReferenceSearch =
  /** The oldest transaction naming the reference that pays the deposit. */
  | { kind: "paid"; signature: string; tx: TransferFacts; receivedBaseUnits: bigint }
  /**
   * Transactions name the reference and none pays: the first one's refusal. Anyone can
   * name a reference, so this says what was seen, not that the deposit is settled.
   */
  | { kind: "refused"; signature: string; code: DepositRefusalCode; message: string }
  /** Nothing names the reference yet at the client's commitment. */
  | { kind: "not_found" }
  | { kind: "unavailable"; reason: string };

/**
 * A fresh reference is named by the payment alone; more means someone else names it
 * too. Looking at the oldest few keeps the cost of such spam at one listing and this
 * many lookups; a wallet's payment comes before anything that copies its reference.
 */
export const MAX_CANDIDATES = 5;
/**
 * One page of getSignaturesForAddress, newest first. Hiding a payment from the search
 * takes this many later transactions naming its reference (each paying a fee), and the
 * explicit confirm by signature still credits it.
 */
const SIGNATURES_PAGE = 100;

export async function findPaymentByReference(chain: ChainClient, reference: string, expected: ExpectedDeposit): Promise<ReferenceSearch> {
  const listed = await chain.signaturesFor(reference, SIGNATURES_PAGE);
  if (listed.kind === "unavailable") return listed;
  let firstRefusal: Extract<ReferenceSearch, { kind: "refused" }> | undefined;
  let pending = false;
  for (const entry of listed.signatures.slice(0, MAX_CANDIDATES)) {
    const lookup = await chain.getTransfer(entry.signature);
    if (lookup.kind === "unavailable") return lookup;
    // Listed yet not served: the node's indexes disagree for a moment; look again later.
    if (lookup.kind === "not_found") {
      pending = true;
      continue;
    }
    const verdict = verifyDeposit(lookup.tx, expected);
    if (verdict.ok) return { kind: "paid", signature: entry.signature, tx: lookup.tx, receivedBaseUnits: verdict.receivedBaseUnits };
    firstRefusal ??= { kind: "refused", signature: entry.signature, code: verdict.code, message: verdict.message };
  }
  if (pending || !firstRefusal) return { kind: "not_found" };
  return firstRefusal;
}
