import { createTransfer, parseURL } from "@solana/pay";
import { type Connection, type Keypair, sendAndConfirmTransaction } from "@solana/web3.js";

/**
 * Pays a Solana Pay transfer request as a wallet app does, through the real
 * @solana/pay client: parse the URL, build the transfer against the RPC (mint and
 * token accounts read, blockhash fetched), sign, send, wait for confirmation.
 * Answers the transaction's signature.
 */
export async function payTransferRequest(connection: Connection, url: string, payer: Keypair): Promise<string> {
  const fields = parseURL(url);
  if (!("recipient" in fields)) throw new Error(`${url} is a transaction request, not a transfer request`);
  // A wallet asks the user for an amount the URL leaves out; every deposit names one.
  const { amount } = fields;
  if (!amount) throw new Error(`${url} names no amount`);
  const tx = await createTransfer(connection, payer.publicKey, { ...fields, amount }, { commitment: "confirmed" });
  return sendAndConfirmTransaction(connection, tx, [payer], { commitment: "confirmed" });
}
