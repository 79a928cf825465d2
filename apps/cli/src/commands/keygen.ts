import { generateKeyPairSync } from "node:crypto";
import { closeSync, mkdirSync, openSync, renameSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { CmError, walletAddress } from "@cm/sdk";
import { type Run, str } from "../args";

/**
 * A new ed25519 keypair in the Solana CLI's file format (`solana-keygen new -o`):
 * a JSON array of the 64 secret-key bytes, the seed then the public key.
 */
export function newSolanaKeypair(): { secretKey: Uint8Array; publicKey: Uint8Array } {
  const jwk = generateKeyPairSync("ed25519").privateKey.export({ format: "jwk" });
  const seed = Buffer.from(jwk.d!, "base64url");
  const publicKey = Buffer.from(jwk.x!, "base64url");
  return { secretKey: Uint8Array.from([...seed, ...publicKey]), publicKey: Uint8Array.from(publicKey) };
}

/** The secret key is the wallet: written 0600 from the first byte, and never over a file that exists unless --force. */
export const keygen: Run = async (ctx, { flags }) => {
  const path = str(flags, "outfile") ?? ctx.keypairPath;
  const { secretKey, publicKey } = newSolanaKeypair();
  const text = JSON.stringify([...secretKey]);
  // 0700 as solana-keygen leaves ~/.config/solana: the folder holds wallets.
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  if (flags.force) {
    // Written whole beside it, then renamed over it: the old key is never half replaced, and the new file is 0600 whatever the old one was.
    const partial = `${path}.${process.pid}.tmp`;
    writeNew(partial, text);
    renameSync(partial, path);
  } else {
    try {
      writeNew(path, text);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      throw new CmError(
        "KEYPAIR_EXISTS",
        `${path} already exists: it may hold a wallet's only key; pass --force to replace it, or --outfile PATH for another file`,
      );
    }
  }
  const address = walletAddress(publicKey);
  if (ctx.json) return ctx.out.json({ publicKey: address, path });
  ctx.out.line(address);
  ctx.out.note(`Wrote a new keypair to ${path} (mode 0600); its public key (wallet address) is above. Keep a copy: nothing else can recover it.`);
};

/** Creates `path` exclusively (EEXIST if it exists) with mode 0600: a umask only takes bits away. */
function writeNew(path: string, text: string) {
  const fd = openSync(path, "wx", 0o600);
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
}
