import { VersionedTransaction } from "@solana/web3.js";
import bs58 from "bs58";
import nacl from "tweetnacl";
import type { Execution, FakeTokenLedger } from "./fake-token-ledger";
import { UnsupportedByFake } from "./fake-token-ledger";

/**
 * `sendTransaction` as an Agave 2.x node answers it: decode (base58 by default,
 * base64 as web3.js sends), deserialize, sanitize, then unless `skipPreflight`
 * verify the signatures and simulate, refusing with the node's codes and words.
 * A transaction that passes is executed against the fake's token ledger and lands.
 */

export interface RpcError {
  code: number;
  message: string;
  data?: unknown;
}
export type RpcAnswer = { result: unknown } | { error: RpcError };

export interface SendChain {
  ledger: FakeTokenLedger;
  isBlockhashValid(blockhash: string): boolean;
  hasLanded(signature: string): boolean;
  /** Applies the execution (`execution.commit()`) and records the transaction as landed in a new slot. */
  land(tx: VersionedTransaction, execution: Execution): void;
}

const invalidParams = (message: string): RpcAnswer => ({ error: { code: -32602, message } });
/** -32002 with the simulation's result as data, as web3's SendTransactionError reads it. */
const preflightFailure = (err: unknown, what: string, logs: string[] = []): RpcAnswer => ({
  error: {
    code: -32002,
    message: `Transaction simulation failed: ${what}`,
    data: { accounts: null, err, innerInstructions: null, logs, replacementBlockhash: null, returnData: null, unitsConsumed: 0 },
  },
});

export function sendTransaction(chain: SendChain, params: unknown[]): RpcAnswer {
  const [data, rawConfig] = params;
  const config = (rawConfig ?? {}) as { encoding?: string; skipPreflight?: boolean };
  if (typeof data !== "string") return invalidParams("Invalid params: invalid type: expected a string.");
  const encoding = config.encoding ?? "base58";
  if (encoding === "json" || encoding === "jsonParsed" || encoding === "binary") {
    return invalidParams(`unsupported encoding: ${encoding}. Supported encodings: base58, base64`);
  }
  if (encoding !== "base58" && encoding !== "base64") {
    return invalidParams(`Invalid params: unknown variant \`${encoding}\`, expected one of \`binary\`, \`base64\`, \`base58\`, \`json\`, \`jsonParsed\`.`);
  }
  const bytes = encoding === "base58" ? bs58.decodeUnsafe(data) : strictBase64(data);
  if (!bytes) return invalidParams(`invalid ${encoding} encoding: ${encoding === "base58" ? "InvalidCharacter" : "InvalidByte"}`);

  const what = "solana_transaction::versioned::VersionedTransaction";
  let tx: VersionedTransaction;
  try {
    tx = VersionedTransaction.deserialize(bytes);
  } catch {
    return invalidParams(`failed to deserialize ${what}: io error: failed to fill whole buffer`);
  }
  // The node's bincode rejects trailing bytes.
  if (tx.serialize().length !== bytes.length) return invalidParams(`failed to deserialize ${what}: Slice had bytes remaining after deserialization`);
  if (!sanitized(tx)) return invalidParams("invalid transaction: Transaction failed to sanitize accounts offsets correctly");

  const signature = bs58.encode(tx.signatures[0]!);
  const refusal = preflight(chain, tx);
  // Without preflight the node forwards what it was given, and one that cannot land is dropped unseen.
  if (refusal) return config.skipPreflight ? { result: signature } : refusal;

  let execution: Execution;
  try {
    execution = chain.ledger.execute(tx);
  } catch (err) {
    if (err instanceof UnsupportedByFake) return { error: { code: -32603, message: err.message } };
    throw err;
  }
  if (execution.failure && !config.skipPreflight) {
    const { index, message } = execution.failure;
    return preflightFailure(execution.err, `Error processing Instruction ${index}: ${message}`, execution.logs);
  }
  // A transaction whose program failed still lands (and pays its fee) when preflight was skipped.
  chain.land(tx, execution);
  return { result: signature };
}

/** What keeps a transaction from landing at all: signatures, lookup tables, blockhash, a replay. */
function preflight(chain: SendChain, tx: VersionedTransaction): RpcAnswer | null {
  const message = tx.message.serialize();
  const signers = tx.message.staticAccountKeys.slice(0, tx.message.header.numRequiredSignatures);
  if (!signers.every((key, i) => nacl.sign.detached.verify(message, tx.signatures[i]!, key.toBytes()))) {
    return { error: { code: -32003, message: "Transaction signature verification failure" } };
  }
  // The fake holds no address lookup tables.
  if (tx.message.addressTableLookups.length > 0) {
    return preflightFailure("AddressLookupTableNotFound", "Transaction loads an address table account that doesn't exist");
  }
  if (!chain.isBlockhashValid(tx.message.recentBlockhash)) return preflightFailure("BlockhashNotFound", "Blockhash not found");
  if (chain.hasLanded(bs58.encode(tx.signatures[0]!))) return preflightFailure("AlreadyProcessed", "This transaction has already been processed");
  return null;
}

/** One signature per required signer, and every instruction's indexes inside the account keys. */
function sanitized(tx: VersionedTransaction): boolean {
  const { header, staticAccountKeys, compiledInstructions, addressTableLookups } = tx.message;
  if (tx.signatures.length !== header.numRequiredSignatures || header.numRequiredSignatures === 0) return false;
  const loaded = addressTableLookups.reduce((n, l) => n + l.readonlyIndexes.length + l.writableIndexes.length, 0);
  const count = staticAccountKeys.length + loaded;
  return compiledInstructions.every(
    (ix) => ix.programIdIndex > 0 && ix.programIdIndex < staticAccountKeys.length && ix.accountKeyIndexes.every((i) => i < count),
  );
}

/** Node's base64 decoder skips bad characters; the node's refuses them. */
function strictBase64(text: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) return undefined;
  return Buffer.from(text, "base64");
}
