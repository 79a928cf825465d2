// The payout transfer: pure, given the hot wallet's keypair and a blockhash.
// First, so that spl-token finds bigint-buffer loaded without its unactionable warning.
import "./quiet-bigint-buffer";
import {
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  TOKEN_PROGRAM_ID,
} from "@solana/spl-token";
import { type Keypair, PublicKey, TransactionInstruction, TransactionMessage, VersionedTransaction } from "@solana/web3.js";
import bs58 from "bs58";

const MEMO_PROGRAM_ID = new PublicKey("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");

export type PayoutTransfer = {
  payer: Keypair;
  mint: string;
  decimals: number;
  /** The operator's wallet; its associated token account receives the tokens (made if missing, paid by the hot wallet). */
  destinationOwner: string;
  amountBaseUnits: bigint;
  blockhash: string;
  /** Written in a memo, so the transfer names the payout it pays on any explorer. */
  payoutId: string;
  /**
   * Which transfer of the payout this is, in the memo too: a new transfer signed
   * with the blockhash of the one it replaces (one that landed and failed can be
   * replaced within its blockhash's life) would otherwise be the same bytes, the
   * same signature, and be refused as already processed.
   */
  attempt: number;
};

/** Builds and signs one payout: the receiving token account made if missing, a transferChecked, a memo naming the payout. */
export function signPayoutTransfer(t: PayoutTransfer): { signature: string; signedTx: string } {
  const mint = new PublicKey(t.mint);
  const owner = new PublicKey(t.destinationOwner);
  const source = getAssociatedTokenAddressSync(mint, t.payer.publicKey, true, TOKEN_PROGRAM_ID);
  const destination = getAssociatedTokenAddressSync(mint, owner, true, TOKEN_PROGRAM_ID);
  const instructions = [
    createAssociatedTokenAccountIdempotentInstruction(t.payer.publicKey, destination, owner, mint, TOKEN_PROGRAM_ID),
    createTransferCheckedInstruction(source, mint, destination, t.payer.publicKey, t.amountBaseUnits, t.decimals, [], TOKEN_PROGRAM_ID),
    new TransactionInstruction({ programId: MEMO_PROGRAM_ID, keys: [], data: Buffer.from(`cm payout ${t.payoutId} #${t.attempt}`) }),
  ];
  const message = new TransactionMessage({ payerKey: t.payer.publicKey, recentBlockhash: t.blockhash, instructions }).compileToV0Message();
  const tx = new VersionedTransaction(message);
  tx.sign([t.payer]);
  return { signature: bs58.encode(tx.signatures[0]!), signedTx: Buffer.from(tx.serialize()).toString("base64") };
}
