/**
 * What the payout sender needs of the chain, already out of any RPC vendor's
 * format. Every call may answer `unavailable`: nothing is known then, and the
 * sender decides nothing on it (it asks again on its next turn).
 */
export interface PayoutChain {
  /** A blockhash to sign with, and the last block height at which a transaction naming it can land. */
  latestBlockhash(): Promise<{ kind: "ok"; blockhash: string; lastValidBlockHeight: number } | Unavailable>;
  /** The finalized block height, and the slot it was read at. */
  blockHeight(): Promise<{ kind: "ok"; height: number; slot: number } | Unavailable>;
  /**
   * Whether the transaction landed (finalized), searched through the node's
   * whole history, and the slot the answering node had reached: an answer from
   * a node behind the one that gave the height says nothing about what landed since.
   */
  status(signature: string): Promise<(SignatureState & { contextSlot: number }) | Unavailable>;
  /** Sends a signed transaction (base64). `refused`: the node said it will not forward it (preflight), and why. */
  send(signedTxBase64: string): Promise<{ kind: "sent" } | { kind: "refused"; reason: string } | Unavailable>;
}

export type Unavailable = { kind: "unavailable"; reason: string };

export type SignatureState =
  /** Landed and finalized; `failed` when it landed but its execution failed (nothing moved). */
  | { kind: "landed"; failed: boolean; error?: string }
  /** Seen, but not yet finalized. */
  | { kind: "landing" }
  /** Not known to the node. */
  | { kind: "unknown" };
