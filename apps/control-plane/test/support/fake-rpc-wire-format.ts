import { decodeTransferCheckedInstruction, decodeTransferInstruction, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from "@solana/spl-token";
import type { TransactionError, VersionedTransaction } from "@solana/web3.js";
import { PublicKey, TransactionInstruction } from "@solana/web3.js";
import bs58 from "bs58";

/**
 * Pure encoders from a landed transaction to the `getTransaction` result an Agave 2.x
 * node answers, per encoding. Used by the fake RPC server in test/support.
 */

export type WireEncoding = "json" | "jsonParsed" | "base64" | "base58";
export const WIRE_ENCODINGS: readonly string[] = ["json", "jsonParsed", "base64", "base58"];

export interface FakeTokenBalance {
  accountIndex: number;
  mint: string;
  owner: string;
  programId: string;
  amountBaseUnits: bigint;
  decimals: number;
}

/** A CPI as the node records it: compiled against the transaction's account keys. */
export interface FakeInnerInstructions {
  index: number;
  instructions: Array<{ programIdIndex: number; accounts: number[]; data: string; stackHeight: number }>;
}

export interface LandedTx {
  tx: VersionedTransaction;
  err: TransactionError | null;
  fee: number;
  preTokenBalances: FakeTokenBalance[];
  postTokenBalances: FakeTokenBalance[];
  innerInstructions?: FakeInnerInstructions[];
  loadedAddresses?: { writable: string[]; readonly: string[] };
}

const TOKEN_PROGRAMS = new Set([TOKEN_PROGRAM_ID.toBase58(), TOKEN_2022_PROGRAM_ID.toBase58()]);
const NO_LOADED_ADDRESSES = { readonly: [], writable: [] };

export const wireStatus = (err: TransactionError | null) => (err == null ? { Ok: null } : { Err: err });

/** Static keys, then the ones loaded from lookup tables: the index space instructions use. */
function allAccountKeys(landed: LandedTx): string[] {
  const loaded = landed.loadedAddresses ?? NO_LOADED_ADDRESSES;
  return [...landed.tx.message.staticAccountKeys.map((k) => k.toBase58()), ...loaded.writable, ...loaded.readonly];
}

export function encodeMeta(landed: LandedTx, encoding: WireEncoding): unknown {
  const keys = allAccountKeys(landed);
  const tokenAccounts = new Set(landed.postTokenBalances.map((b) => b.accountIndex));
  // Lamports: a funded fee payer, rent-exempt token accounts, and programs/mints.
  const lamports = keys.map((_, i) => (i === 0 ? 1_000_000_000 : tokenAccounts.has(i) ? 2_039_280 : 1_141_440));
  const parsed = encoding === "jsonParsed";
  const programs = landed.tx.message.compiledInstructions.map((ix) => keys[ix.programIdIndex] ?? "");
  const outcome = landed.err == null ? "success" : "failed: custom program error: 0x1";
  return {
    computeUnitsConsumed: 4_644 * programs.length,
    err: landed.err,
    fee: landed.fee,
    innerInstructions: (landed.innerInstructions ?? []).map(({ index, instructions }) => ({
      index,
      instructions: parsed
        ? instructions.map((ix) => encodeParsedInstruction(keys, ix.programIdIndex, ix.accounts, bs58.decode(ix.data), ix.stackHeight))
        : instructions,
    })),
    // jsonParsed folds loaded addresses into accountKeys and leaves them out here.
    ...(parsed ? {} : { loadedAddresses: landed.loadedAddresses ?? NO_LOADED_ADDRESSES }),
    logMessages: programs.flatMap((p) => [`Program ${p} invoke [1]`, `Program ${p} ${outcome}`]),
    postBalances: lamports.map((l, i) => (i === 0 ? l - landed.fee : l)),
    postTokenBalances: landed.postTokenBalances.map(encodeTokenBalance),
    preBalances: lamports,
    preTokenBalances: landed.preTokenBalances.map(encodeTokenBalance),
    rewards: [],
    status: wireStatus(landed.err),
  };
}

export function encodeTransaction(landed: LandedTx, encoding: WireEncoding): unknown {
  const { tx } = landed;
  if (encoding === "base64") return [Buffer.from(tx.serialize()).toString("base64"), "base64"];
  if (encoding === "base58") return [bs58.encode(tx.serialize()), "base58"];
  const message = tx.message;
  const keys = allAccountKeys(landed);
  const signatures = tx.signatures.map((s) => bs58.encode(s));
  const addressTableLookups = message.addressTableLookups.map((l) => ({
    accountKey: l.accountKey.toBase58(),
    readonlyIndexes: l.readonlyIndexes,
    writableIndexes: l.writableIndexes,
  }));
  // Legacy messages have no lookups field at all; v0 ones always carry it.
  const lookups = tx.version === "legacy" ? {} : { addressTableLookups };

  if (encoding === "json") {
    const instructions = message.compiledInstructions.map((ix) => ({
      accounts: ix.accountKeyIndexes,
      data: bs58.encode(ix.data),
      programIdIndex: ix.programIdIndex,
      stackHeight: null,
    }));
    const accountKeys = keys.slice(0, message.staticAccountKeys.length);
    return { message: { accountKeys, header: message.header, instructions, recentBlockhash: message.recentBlockhash, ...lookups }, signatures };
  }

  const staticCount = message.staticAccountKeys.length;
  const loadedWritable = landed.loadedAddresses?.writable.length ?? 0;
  const accountKeys = keys.map((pubkey, i) => ({
    pubkey,
    signer: i < staticCount && message.isAccountSigner(i),
    source: i < staticCount ? "transaction" : "lookupTable",
    writable: i < staticCount ? message.isAccountWritable(i) : i < staticCount + loadedWritable,
  }));
  const instructions = message.compiledInstructions.map((ix) => encodeParsedInstruction(keys, ix.programIdIndex, ix.accountKeyIndexes, ix.data, null));
  return { message: { accountKeys, instructions, recentBlockhash: message.recentBlockhash, ...lookups }, signatures };
}

function encodeTokenBalance(b: FakeTokenBalance): unknown {
  const { accountIndex, mint, owner, programId } = b;
  return { accountIndex, mint, owner, programId, uiTokenAmount: uiTokenAmount(b.amountBaseUnits, b.decimals) };
}

/** The node's UiTokenAmount: the exact string, plus a float and a trimmed string for display. */
export function uiTokenAmount(amount: bigint, decimals: number) {
  const digits = amount.toString().padStart(decimals + 1, "0");
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, "");
  const uiAmountString = fraction ? `${whole}.${fraction}` : whole;
  return { amount: amount.toString(), decimals, uiAmount: Number(uiAmountString), uiAmountString };
}

/** jsonParsed form of one instruction: spl-token transfers parsed, anything else partially decoded. */
function encodeParsedInstruction(keys: string[], programIdIndex: number, accountIndexes: number[], data: Uint8Array, stackHeight: number | null): unknown {
  const programId = keys[programIdIndex] ?? "";
  const accounts = accountIndexes.map((i) => keys[i] ?? "");
  const parsed = TOKEN_PROGRAMS.has(programId) ? parseTokenTransfer(programId, accounts, data) : null;
  if (parsed) return { parsed, program: "spl-token", programId, stackHeight };
  return { accounts, data: bs58.encode(data), programId, stackHeight };
}

function parseTokenTransfer(programId: string, accounts: string[], data: Uint8Array): unknown {
  const instruction = new TransactionInstruction({
    programId: new PublicKey(programId),
    keys: accounts.map((a) => ({ pubkey: new PublicKey(a), isSigner: false, isWritable: false })),
    data: Buffer.from(data),
  });
  try {
    if (data[0] === 3) {
      const { keys, data: decoded } = decodeTransferInstruction(instruction, instruction.programId);
      const info = {
        amount: decoded.amount.toString(),
        destination: keys.destination.pubkey.toBase58(),
        source: keys.source.pubkey.toBase58(),
        ...signerFields(keys.owner.pubkey, keys.multiSigners),
      };
      return { info, type: "transfer" };
    }
    if (data[0] === 12) {
      const { keys, data: decoded } = decodeTransferCheckedInstruction(instruction, instruction.programId);
      const info = {
        destination: keys.destination.pubkey.toBase58(),
        mint: keys.mint.pubkey.toBase58(),
        source: keys.source.pubkey.toBase58(),
        tokenAmount: uiTokenAmount(decoded.amount, decoded.decimals),
        ...signerFields(keys.owner.pubkey, keys.multiSigners),
      };
      return { info, type: "transferChecked" };
    }
  } catch {
    // Malformed data: the node falls back to the partially decoded form, and so do we.
  }
  return null;
}

/** The node names a lone signer "authority", and a multisig "multisigAuthority" plus its "signers". */
function signerFields(owner: PublicKey, multiSigners: Array<{ pubkey: PublicKey }>) {
  if (multiSigners.length === 0) return { authority: owner.toBase58() };
  return { multisigAuthority: owner.toBase58(), signers: multiSigners.map((s) => s.pubkey.toBase58()) };
}
