import bs58 from "bs58";

const ED25519_SIGNATURE_BYTES = 64;
// 64 bytes in base58 is 87 or 88 characters; the bound keeps decoding cheap on junk input.
const MAX_SIGNATURE_CHARS = 88;

/** True when `text` is a base58 ed25519 signature, the id Solana gives a transaction. */
export function isTransactionSignature(text: string): boolean {
  if (text.length === 0 || text.length > MAX_SIGNATURE_CHARS) return false;
  const bytes = bs58.decodeUnsafe(text);
  return bytes !== undefined && bytes.length === ED25519_SIGNATURE_BYTES;
}
