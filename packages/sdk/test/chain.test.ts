import * as spl from "@solana/spl-token";
import * as web3 from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import { tokenInstructions } from "../src/chain";

// The SDK builds its two token instructions by hand (to keep spl-token out of the CLI):
// byte for byte what @solana/spl-token builds.

const token = tokenInstructions(web3);
const owner = web3.Keypair.generate().publicKey;
const treasury = web3.Keypair.generate().publicKey;
const mint = new web3.PublicKey("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v");
const plain = (ix: web3.TransactionInstruction) => ({
  programId: ix.programId.toBase58(),
  keys: ix.keys.map((k) => ({ ...k, pubkey: k.pubkey.toBase58() })),
  data: [...ix.data],
});

describe("token instructions", () => {
  it("derives the associated token account as spl-token does", () => {
    expect(token.associatedAccount(owner, mint).toBase58()).toBe(spl.getAssociatedTokenAddressSync(mint, owner).toBase58());
  });

  it("builds CreateIdempotent and transferChecked as spl-token does", () => {
    const destination = token.associatedAccount(treasury, mint);
    expect(plain(token.createAssociatedAccountIdempotent(owner, destination, treasury, mint))).toEqual(
      plain(spl.createAssociatedTokenAccountIdempotentInstruction(owner, destination, treasury, mint)),
    );
    const source = token.associatedAccount(owner, mint);
    expect(plain(token.transferChecked(source, mint, destination, owner, 12_345_678_901n, 6))).toEqual(
      plain(spl.createTransferCheckedInstruction(source, mint, destination, owner, 12_345_678_901n, 6)),
    );
  });
});
