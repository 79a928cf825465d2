/**
 * The control plane's view of the chain: only the facts a deposit check needs,
 * already translated out of any RPC vendor's format.
 */
export interface ChainClient {
  /** Looks up a transaction by signature and translates it into the facts the deposit check needs. */
  getTransfer(signature: string): Promise<ChainLookup>;
  /**
   * The transactions that name `address` among their account keys, oldest first, at
   * most `limit` of the newest: how a payment is found by its Solana Pay reference.
   * With `until`, only those newer than that transaction (the node lists everything
   * when it does not know it).
   */
  signaturesFor(address: string, limit: number, until?: string): Promise<SignaturesLookup>;
}

/** One transaction naming an address, as the node lists it (before any getTransaction). */
export interface SignatureEntry {
  signature: string;
  slot: number;
  /** The node already knows its execution failed. */
  failed: boolean;
  blockTimeMs: number | null;
}

export type SignaturesLookup =
  | { kind: "found"; signatures: SignatureEntry[] }
  /** RPC down, slow or answered an error: nothing is known, the caller may retry. */
  | { kind: "unavailable"; reason: string };

export type ChainLookup =
  | { kind: "found"; tx: TransferFacts }
  /** Not (yet) visible at the configured commitment, or not a well-formed signature at all. */
  | { kind: "not_found" }
  /** RPC down, slow (timeout), or answered an error: nothing is known, the caller may retry. */
  | { kind: "unavailable"; reason: string };

/** `confirmed` is fast (~1 s, supermajority voted); `finalized` cannot roll back (~13 s). */
export type ChainCommitment = "confirmed" | "finalized";

/** One SPL `transfer` / `transferChecked` (top-level or inner), as executed or attempted. */
export interface TokenTransfer {
  mint: string;
  /** Token account debited. */
  source: string;
  /** Token account credited. */
  destination: string;
  /** Wallet owning `destination`, from the token balances; null when the node did not report it. */
  destinationOwner: string | null;
  /** Signer that moved the tokens: the source's owner (or its delegate / multisig account). */
  authority: string;
  amountBaseUnits: bigint;
  decimals: number;
}

/** How one token account's balance changed across the transaction. */
export interface TokenBalanceDelta {
  /** Token account address. */
  account: string;
  accountIndex: number;
  /** Wallet owning the token account after the transaction (before it, if it was closed). */
  owner: string | null;
  mint: string;
  /** post - pre; negative when tokens left the account. */
  deltaBaseUnits: bigint;
  decimals: number;
}

export interface TransferFacts {
  signature: string;
  slot: number;
  /** Block time in ms since the epoch; null when the node does not know it. */
  blockTimeMs: number | null;
  /** The transaction landed but its execution failed (meta.err set): nothing moved. */
  failed: boolean;
  transfers: TokenTransfer[];
  tokenBalanceDeltas: TokenBalanceDelta[];
  /** Every account the transaction names, base58, lookup-table ones included: a Solana Pay reference is one of them. */
  accountKeys: string[];
}
