import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { CmError, keypairSigner } from "@cm/sdk";

export const defaultKeypairPath = () => join(homedir(), ".config", "solana", "id.json");

/** The Solana CLI's keypair file (a JSON array of 64 numbers) as a signer; CmError KEYPAIR_* when it is not one. */
export async function readKeypair(path: string) {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no such file" : code === "EACCES" ? "not readable" : (code ?? String(err));
    throw new CmError(
      "KEYPAIR_NOT_FOUND",
      `cannot read the keypair ${path} (${why}): create one there with \`cm keygen\`, or pass --keypair PATH or set CM_KEYPAIR to one you have`,
    );
  }
  let bytes: unknown;
  try {
    bytes = JSON.parse(text);
  } catch {
    bytes = undefined;
  }
  if (!Array.isArray(bytes) || bytes.length !== 64 || !bytes.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)) {
    throw new CmError("KEYPAIR_INVALID", `${path} is not a Solana keypair: expected a JSON array of 64 numbers from 0 to 255, as \`solana-keygen new\` writes`);
  }
  try {
    return await keypairSigner(Uint8Array.from(bytes));
  } catch (err) {
    throw new CmError("KEYPAIR_INVALID", `${path} is not a valid ed25519 keypair: ${(err as Error).message}`);
  }
}
