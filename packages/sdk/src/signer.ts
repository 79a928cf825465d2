import bs58 from "bs58";

/**
 * Anything that holds an ed25519 key: a keypair (see keypairSigner, or tweetnacl's
 * `{ publicKey, signMessage: async (m) => nacl.sign.detached(m, secretKey) }`) or a
 * browser wallet (Phantom, Solflare and the Wallet Standard adapters pass as they are).
 */
export interface Signer {
  publicKey: Uint8Array | string | { toBase58(): string } | { toBytes(): Uint8Array };
  signMessage(message: Uint8Array): Promise<Uint8Array | { signature: Uint8Array }> | Uint8Array;
}

/** The wallet address (base58) of a signer's public key, whichever form it comes in. */
export function walletAddress(publicKey: Signer["publicKey"]): string {
  if (typeof publicKey === "string") return publicKey;
  if (publicKey instanceof Uint8Array) return bs58.encode(publicKey);
  if ("toBase58" in publicKey) return publicKey.toBase58();
  return bs58.encode(publicKey.toBytes());
}

export async function signText(signer: Signer, text: string): Promise<string> {
  const answer = await signer.signMessage(new TextEncoder().encode(text));
  return toBase64(answer instanceof Uint8Array ? answer : answer.signature);
}

/**
 * A signer over a Solana keypair's 64-byte secret key (seed then public key, the
 * Solana CLI's id.json format), signing with WebCrypto's Ed25519: no library.
 */
export async function keypairSigner(secretKey: Uint8Array): Promise<Signer & { publicKey: Uint8Array; secretKey: Uint8Array }> {
  if (secretKey.length !== 64) throw new TypeError(`a keypair's secret key is 64 bytes, not ${secretKey.length}`);
  const publicKey = secretKey.slice(32);
  const jwk = { kty: "OKP", crv: "Ed25519", d: toBase64Url(secretKey.slice(0, 32)), x: toBase64Url(publicKey), ext: false };
  const key = await crypto.subtle.importKey("jwk", jwk, { name: "Ed25519" }, false, ["sign"]);
  return {
    publicKey,
    secretKey,
    signMessage: async (message) => new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, key, new Uint8Array(message))),
  };
}

export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

const toBase64Url = (bytes: Uint8Array) => toBase64(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
