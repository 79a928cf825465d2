import { readFileSync, statSync } from "node:fs";
import { Keypair } from "@solana/web3.js";

/** A PAYOUT_KEYPAIR the control plane will not start with: the operator's to fix, like any configuration mistake. */
export class PayoutKeypairError extends Error {}

/**
 * The hot wallet's keypair from PAYOUT_KEYPAIR, read once at start. A file that
 * others may read is refused (as ssh refuses such a private key): whoever reads
 * it can empty the wallet. Errors name the file, never its contents.
 */
export function loadPayoutKeypair(path: string): Keypair {
  let mode: number;
  try {
    mode = statSync(path).mode;
  } catch (error) {
    throw new PayoutKeypairError(`PAYOUT_KEYPAIR: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? "error"})`);
  }
  if ((mode & 0o077) !== 0) {
    throw new PayoutKeypairError(
      `PAYOUT_KEYPAIR: ${path} has mode ${(mode & 0o777).toString(8).padStart(4, "0")}; others may read the payout wallet's key. Run: chmod 600 ${path}`,
    );
  }
  let bytes: unknown;
  try {
    bytes = JSON.parse(readFileSync(path, "utf8"));
  } catch {
    throw new PayoutKeypairError(
      `PAYOUT_KEYPAIR: ${path} is not JSON; it must hold the Solana CLI's keypair format, a JSON array of 64 numbers (solana-keygen new -o FILE)`,
    );
  }
  if (!Array.isArray(bytes) || bytes.length !== 64 || !bytes.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)) {
    throw new PayoutKeypairError(`PAYOUT_KEYPAIR: ${path} must hold a JSON array of 64 numbers from 0 to 255 (the Solana CLI's keypair format)`);
  }
  try {
    return Keypair.fromSecretKey(Uint8Array.from(bytes as number[]));
  } catch {
    throw new PayoutKeypairError(`PAYOUT_KEYPAIR: ${path} does not hold a valid ed25519 keypair (its public half does not match its secret half)`);
  }
}
