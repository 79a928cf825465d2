import { createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { PublicKey, Transaction, TransactionError } from "@solana/web3.js";
import { VersionedTransaction } from "@solana/web3.js";
import bs58 from "bs58";
import { encodeAccount, type FakeAccount } from "./fake-rpc-accounts";
import { type FakeFault, FaultPlan } from "./fake-rpc-faults";
import { createFakePubsub } from "./fake-rpc-pubsub";
import { type RpcAnswer, type RpcError, type SendChain, sendTransaction } from "./fake-rpc-send";
import type { FakeInnerInstructions, FakeTokenBalance, LandedTx, WireEncoding } from "./fake-rpc-wire-format";
import { encodeMeta, encodeTransaction, uiTokenAmount, WIRE_ENCODINGS, wireStatus } from "./fake-rpc-wire-format";
import { type Execution, FakeTokenLedger, MEMO_PROGRAMS } from "./fake-token-ledger";

export type { FakeFault } from "./fake-rpc-faults";
export type { FakeInnerInstructions, FakeTokenBalance } from "./fake-rpc-wire-format";
export { uiTokenAmount } from "./fake-rpc-wire-format";

/**
 * A local Solana JSON-RPC node for tests: real HTTP on 127.0.0.1 and its pubsub
 * WebSocket on the next port, answering in the wire format of an Agave 2.x node, so
 * @solana/web3.js's own response validation checks every answer. Transactions either
 * land by `addTransaction` (any shape, with the meta the test says) or are sent as
 * clients send them (`sendTransaction`): verified, executed against the fake's token
 * accounts (`fundTokenAccount`), and landed finalized with the balances they moved.
 * Mints, token accounts and their owners' wallets answer `getAccountInfo`, which is
 * what `@solana/pay`'s createTransfer reads. Any method can be told to fail (`fail`).
 */

export type FakeCommitment = "confirmed" | "finalized";

export interface FakeTxMeta {
  err: TransactionError | null;
  fee: number;
  slot: number;
  blockTimeSeconds: number | null;
  preTokenBalances: FakeTokenBalance[];
  postTokenBalances: FakeTokenBalance[];
  innerInstructions?: FakeInnerInstructions[];
  loadedAddresses?: { writable: string[]; readonly: string[] };
  /** Defaults to finalized; a confirmed-only transaction is invisible to finalized reads. */
  commitment?: FakeCommitment;
}

export interface FakeSolanaRpc {
  url: string;
  /** The pubsub WebSocket: the RPC port + 1, where web3.js's Connection looks for it. */
  wsUrl: string;
  /** Gives `owner` an associated token account of `mint` with `amountBaseUnits` more; answers its address. */
  fundTokenAccount(o: { owner: PublicKey; mint: PublicKey; decimals: number; amountBaseUnits: bigint }): PublicKey;
  /** A token account's balance in base units; undefined when it does not exist. */
  tokenBalance(account: PublicKey | string): bigint | undefined;
  /** Signatures `sendTransaction` answered, oldest first (a transaction dropped without preflight included). */
  sent: string[];
  /** Stores a signed transaction as landed; returns its signature (base58). */
  addTransaction(signedTx: Transaction | VersionedTransaction, meta: FakeTxMeta): string;
  setCommitment(signature: string, commitment: FakeCommitment): void;
  /** "refuse" closes the port (ECONNREFUSED); "http503" answers every request 503. */
  setDown(down: boolean, how?: "refuse" | "http503"): Promise<void>;
  setDelayMs(delayMs: number): void;
  /** Answer every call with this JSON-RPC error (e.g. -32005 "Node is behind"), or stop with null. */
  setRpcError(error: RpcError | null): void;
  /** The next `times` calls of `method`, HTTP or pubsub (every one until heal() when omitted), meet `fault`. */
  fail(method: string, fault: FakeFault, times?: number): void;
  /** Ends the faults planned for `method`, or for every method. */
  heal(method?: string): void;
  /** Produces `count` empty blocks: time passing, so blockhashes (150 blocks) expire without anything landing. */
  advanceBlocks(count: number): void;
  /**
   * Token movements into accounts by landed transactions that did not fail: what
   * the chain says was paid, whatever any client believes it sent. A token
   * account created by the transaction counts from zero.
   */
  landedTransfers(): Array<{ signature: string; destination: string; amountBaseUnits: bigint }>;
  /** Every JSON-RPC call received, HTTP and pubsub, oldest first. */
  calls: Array<{ method: string; params: unknown[] }>;
  close(): Promise<void>;
}

interface Stored extends LandedTx {
  meta: FakeTxMeta;
  commitment: FakeCommitment;
}
const CORE_VERSION = "2.2.16";
const BASE_SLOT = 330_000_000;
const BASE_BLOCK_HEIGHT = 308_000_000;
/** A blockhash is usable for 150 blocks after the one it names. */
const BLOCKHASH_VALID_BLOCKS = 150;
const BLOCKHASH = "4sGjMW1sUnHzSxGspuhpqLDx6wiyjNtZAMdL4VZHirAn";
const FEE_PER_SIGNATURE_LAMPORTS = 5_000;
/** What every wallet the fake knows holds: lamports are not kept, fee payers count as funded. */
const WALLET_LAMPORTS = 1_000_000_000;
/** What `answer` gives for a call whose answer must never come. */
const NO_ANSWER = Symbol("no answer");

export interface FakeSolanaRpcOptions {
  /** The clock sent transactions take their block time from (ms). */
  now?: () => number;
}

export async function startFakeSolanaRpc(options: FakeSolanaRpcOptions = {}): Promise<FakeSolanaRpc> {
  const now = options.now ?? Date.now;
  const txs = new Map<string, Stored>();
  const calls: FakeSolanaRpc["calls"] = [];
  const sent: string[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const ledger = new FakeTokenLedger();
  const faults = new FaultPlan();
  // Wallets that paid a fee here; owners of token accounts are wallets too.
  const feePayers = new Set<string>();
  // Each sent transaction lands in a block of its own, which brings a new blockhash.
  let blocks = 0;
  const blockHeight = () => BASE_BLOCK_HEIGHT + blocks;
  const blockhashes = new Map<string, number>([[BLOCKHASH, BASE_BLOCK_HEIGHT + BLOCKHASH_VALID_BLOCKS]]);
  let latestBlockhash = BLOCKHASH;
  let delayMs = 0;
  let http503 = false;
  let rpcError: RpcError | null = null;
  const pubsub = createFakePubsub(
    (signature) => {
      const stored = txs.get(signature);
      return stored && { slot: stored.meta.slot, err: stored.meta.err, commitment: stored.commitment };
    },
    (method, params) => calls.push({ method, params }),
    (method) => faults.take(method),
  );

  const server = createServer((req, res) => void handle(req, res).catch(() => res.destroy()));
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body = "";
    for await (const chunk of req) body += String(chunk);
    if (delayMs > 0) await new Promise<void>((done) => timers.add(setTimeout(done, delayMs)));
    if (http503) return void res.writeHead(503, { "content-type": "text/plain" }).end("Service Unavailable");
    let request: unknown;
    try {
      request = JSON.parse(body);
    } catch {
      return send(res, { jsonrpc: "2.0", error: { code: -32700, message: "Parse error" }, id: null });
    }
    const answers = Array.isArray(request) ? request.map(answer) : [answer(request)];
    // One withheld answer holds the whole HTTP response, a batch's included; close() ends it.
    if (answers.includes(NO_ANSWER)) return;
    send(res, Array.isArray(request) ? answers : answers[0]);
  }

  function answer(request: unknown): unknown {
    const { id = null, method, params = [] } = (request ?? {}) as { id?: unknown; method?: unknown; params?: unknown[] };
    calls.push({ method: String(method), params });
    if (rpcError) return { jsonrpc: "2.0", error: rpcError, id };
    const fault = faults.take(String(method));
    if (fault?.kind === "no-answer") return NO_ANSWER;
    if (fault?.kind === "error") return { jsonrpc: "2.0", error: fault.error, id };
    const answered = dispatch(String(method), params, fault);
    return fault?.kind === "lost-answer" ? NO_ANSWER : { jsonrpc: "2.0", ...answered, id };
  }

  const currentSlot = () => Math.max(BASE_SLOT, ...[...txs.values()].map((s) => s.meta.slot + 32));
  const context = () => ({ apiVersion: CORE_VERSION, slot: currentSlot() });
  function dispatch(method: string, params: unknown[], fault: FakeFault | undefined): RpcAnswer {
    switch (method) {
      case "getTransaction":
        return getTransaction(txs, params);
      case "sendTransaction": {
        const answer = sendTransaction(faultyChain(fault), params);
        if ("result" in answer) sent.push(String(answer.result));
        return answer;
      }
      case "getSignaturesForAddress":
        return getSignaturesForAddress(txs, params);
      case "getAccountInfo": {
        const value = accountValue(params[0], params[1]);
        return "error" in value ? value : { result: { context: context(), value: value.result } };
      }
      case "getMultipleAccounts": {
        const keys = Array.isArray(params[0]) ? (params[0] as unknown[]) : [];
        const values = keys.map((key) => accountValue(key, params[1]));
        const failed = values.find((v) => "error" in v);
        return failed ?? { result: { context: context(), value: values.map((v) => ("result" in v ? v.result : null)) } };
      }
      case "getTokenAccountBalance": {
        const account = typeof params[0] === "string" ? ledger.account(params[0]) : undefined;
        if (!account) return { error: { code: -32602, message: "Invalid param: could not find account" } };
        return { result: { context: context(), value: uiTokenAmount(account.amountBaseUnits, account.decimals) } };
      }
      case "getBlockHeight":
        return { result: blockHeight() };
      case "isBlockhashValid":
        return { result: { context: context(), value: isBlockhashValid(String(params[0])) } };
      case "getSignatureStatuses": {
        const signatures = Array.isArray(params[0]) ? (params[0] as unknown[]) : [];
        const seenUpTo = fault?.kind === "behind" ? currentSlot() - fault.slots : Number.POSITIVE_INFINITY;
        const known = (s: unknown) => {
          const stored = txs.get(String(s));
          return stored && stored.meta.slot <= seenUpTo ? stored : undefined;
        };
        const ctx = fault?.kind === "behind" ? { ...context(), slot: seenUpTo } : context();
        return { result: { context: ctx, value: signatures.map((s) => signatureStatus(known(s))) } };
      }
      case "getEpochInfo":
        return {
          result: {
            absoluteSlot: currentSlot(),
            blockHeight: blockHeight(),
            epoch: Math.floor(currentSlot() / 432_000),
            slotIndex: currentSlot() % 432_000,
            slotsInEpoch: 432_000,
            transactionCount: 400_000_000_000 + txs.size,
          },
        };
      case "getLatestBlockhash":
        return { result: { context: context(), value: { blockhash: latestBlockhash, lastValidBlockHeight: blockhashes.get(latestBlockhash) } } };
      case "getSlot":
        return { result: currentSlot() };
      case "getVersion":
        return { result: { "feature-set": 3294202862, "solana-core": CORE_VERSION } };
      case "getHealth":
        return { result: "ok" };
      default:
        return { error: { code: -32601, message: "Method not found" } };
    }
  }

  /** An account's `value` in the encoding asked for (base64 unless told), or null when the fake holds none at `address`. */
  function accountValue(address: unknown, rawConfig: unknown): RpcAnswer {
    if (typeof address !== "string" || bs58.decodeUnsafe(address)?.length !== 32) return { error: { code: -32602, message: "Invalid param: Invalid" } };
    const { encoding = "base64" } = (rawConfig ?? {}) as { encoding?: string };
    const account = accountAt(address);
    return account ? encodeAccount(account, encoding) : { result: null };
  }
  function accountAt(address: string): FakeAccount | undefined {
    const token = ledger.account(address);
    if (token) return { kind: "token", ...token };
    const mint = ledger.mint(address);
    if (mint) return { kind: "mint", ...mint };
    if (feePayers.has(address) || ledger.ownsAccounts(address)) return { kind: "wallet", lamports: WALLET_LAMPORTS };
    return undefined;
  }

  /** The chain a faulty sendTransaction sees: one that forgot every blockhash, or one whose leader drops what it gets. */
  function faultyChain(fault: FakeFault | undefined): SendChain {
    if (fault?.kind === "blockhash-not-found") return { ...chain, isBlockhashValid: () => false };
    if (fault?.kind === "dropped") return { ...chain, land: () => undefined };
    return chain;
  }

  function produceBlock(): void {
    blocks += 1;
    latestBlockhash = bs58.encode(createHash("sha256").update(`fake blockhash ${blocks}`).digest());
    blockhashes.set(latestBlockhash, blockHeight() + BLOCKHASH_VALID_BLOCKS);
  }

  function isBlockhashValid(blockhash: string): boolean {
    const lastValid = blockhashes.get(blockhash);
    return lastValid !== undefined && blockHeight() <= lastValid;
  }
  const chain = {
    ledger,
    isBlockhashValid,
    hasLanded: (signature: string) => txs.has(signature),
    land(tx: VersionedTransaction, execution: Execution) {
      execution.commit();
      const signature = bs58.encode(tx.signatures[0]!);
      feePayers.add(tx.message.staticAccountKeys[0]!.toBase58());
      const meta: FakeTxMeta = {
        err: execution.err,
        fee: FEE_PER_SIGNATURE_LAMPORTS * tx.signatures.length,
        slot: currentSlot() + 1,
        blockTimeSeconds: Math.floor(now() / 1000),
        preTokenBalances: execution.preTokenBalances,
        postTokenBalances: execution.postTokenBalances,
      };
      txs.set(signature, { ...meta, tx, meta, commitment: "finalized" });
      produceBlock();
      pubsub.check(signature);
    },
  };

  const listen = (port: number) =>
    new Promise<void>((done, fail) => {
      server.once("error", fail);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", fail);
        done();
      });
    });
  const stop = () =>
    new Promise<void>((done) => {
      server.close(() => done());
      // Keep-alive sockets would otherwise hold close() open and keep serving.
      server.closeAllConnections();
    });
  // The pubsub port is the RPC port + 1 (clients derive it): find a pair that is free.
  let port = 0;
  for (let attempt = 0; ; attempt++) {
    await listen(0);
    port = (server.address() as AddressInfo).port;
    try {
      await pubsub.listen(port + 1);
      break;
    } catch (err) {
      await stop();
      if (attempt > 20) throw err;
    }
  }

  return {
    url: `http://127.0.0.1:${port}`,
    wsUrl: `ws://127.0.0.1:${port + 1}`,
    calls,
    sent,
    fundTokenAccount: (o) => ledger.fund(o),
    tokenBalance: (account) => ledger.account(typeof account === "string" ? account : account.toBase58())?.amountBaseUnits,
    addTransaction(signedTx, meta) {
      // Round-trip through the wire bytes so legacy and v0 share one representation.
      const tx = VersionedTransaction.deserialize(signedTx.serialize());
      const signature = bs58.encode(tx.signatures[0] ?? new Uint8Array(64));
      txs.set(signature, { ...meta, tx, meta, commitment: meta.commitment ?? "finalized" });
      pubsub.check(signature);
      return signature;
    },
    setCommitment(signature, commitment) {
      const stored = txs.get(signature);
      if (stored) stored.commitment = commitment;
      pubsub.check(signature);
    },
    async setDown(down, how = "refuse") {
      http503 = down && how === "http503";
      if (how !== "refuse") return;
      if (down && server.listening) await Promise.all([stop(), pubsub.stop()]);
      // Same ports again, so clients holding the URL reconnect.
      if (!down && !server.listening) await Promise.all([listen(port), pubsub.listen(port + 1)]);
    },
    setDelayMs(ms) {
      delayMs = ms;
    },
    setRpcError(error) {
      rpcError = error;
    },
    landedTransfers() {
      const out: Array<{ signature: string; destination: string; amountBaseUnits: bigint }> = [];
      for (const [signature, stored] of txs) {
        if (stored.meta.err) continue;
        const keys = accountKeys(stored);
        for (const post of stored.meta.postTokenBalances) {
          const before = stored.meta.preTokenBalances.find((b) => b.accountIndex === post.accountIndex)?.amountBaseUnits ?? 0n;
          if (post.amountBaseUnits > before) out.push({ signature, destination: keys[post.accountIndex]!, amountBaseUnits: post.amountBaseUnits - before });
        }
      }
      return out;
    },
    fail: (method, fault, times) => faults.fail(method, fault, times),
    heal: (method) => faults.heal(method),
    advanceBlocks(count) {
      for (let i = 0; i < count; i++) produceBlock();
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      await pubsub.stop();
      if (server.listening) await stop();
    },
  };
}

function send(res: ServerResponse, payload: unknown): void {
  if (res.destroyed) return;
  res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(payload));
}

function signatureStatus(stored: Stored | undefined): unknown {
  if (!stored) return null;
  const { err, slot } = stored.meta;
  const confirmations = stored.commitment === "finalized" ? null : 1;
  return { confirmationStatus: stored.commitment, confirmations, err, slot, status: wireStatus(err) };
}

function getTransaction(txs: Map<string, Stored>, params: unknown[]): RpcAnswer {
  const [signature, rawConfig] = params;
  // Old clients send the encoding alone as the second parameter.
  const config = (typeof rawConfig === "string" ? { encoding: rawConfig } : (rawConfig ?? {})) as {
    encoding?: string;
    commitment?: string;
    maxSupportedTransactionVersion?: number;
  };
  const encoding = config.encoding ?? "json";
  const commitment = config.commitment ?? "finalized";
  if (commitment !== "confirmed" && commitment !== "finalized") {
    return { error: { code: -32602, message: "Method does not support commitment below `confirmed`" } };
  }
  if (typeof signature !== "string" || bs58.decodeUnsafe(signature)?.length !== 64) {
    return { error: { code: -32602, message: "Invalid param: Invalid" } };
  }
  if (!WIRE_ENCODINGS.includes(encoding)) {
    return { error: { code: -32602, message: `Invalid params: unknown variant \`${encoding}\`.` } };
  }
  const stored = txs.get(signature);
  if (!stored || (commitment === "finalized" && stored.commitment !== "finalized")) return { result: null };
  const version = stored.tx.version;
  if (version !== "legacy" && (config.maxSupportedTransactionVersion ?? -1) < version) {
    const message =
      `Transaction version (${version}) is not supported by the requesting client. Please try the request again ` +
      `with the following configuration parameter: "maxSupportedTransactionVersion": ${version}`;
    return { error: { code: -32015, message } };
  }
  return {
    result: {
      blockTime: stored.meta.blockTimeSeconds,
      meta: encodeMeta(stored, encoding as WireEncoding),
      slot: stored.meta.slot,
      transaction: encodeTransaction(stored, encoding as WireEncoding),
      // Clients that do not send maxSupportedTransactionVersion get no version field.
      ...(config.maxSupportedTransactionVersion === undefined ? {} : { version }),
    },
  };
}

/** Newest first, as the node lists them: the transactions that name `address` among their account keys. */
function getSignaturesForAddress(txs: Map<string, Stored>, params: unknown[]): RpcAnswer {
  const [address, rawConfig] = params;
  const config = (rawConfig ?? {}) as { limit?: number; before?: string; until?: string; commitment?: string };
  if (typeof address !== "string" || bs58.decodeUnsafe(address)?.length !== 32) return { error: { code: -32602, message: "Invalid param: Invalid" } };
  if (config.commitment === "processed") return { error: { code: -32602, message: "Method does not support commitment below `confirmed`" } };
  const limit = config.limit ?? 1000;
  if (limit < 1 || limit > 1000) return { error: { code: -32602, message: "Invalid limit; max 1000" } };
  const visible = [...txs.entries()]
    .filter(([, s]) => (config.commitment !== "confirmed" ? s.commitment === "finalized" : true))
    // Every account key counts, read-only non-signers (a Solana Pay reference) and ones loaded from lookup tables included.
    .filter(([, s]) => accountKeys(s).includes(address))
    .sort(([, a], [, b]) => b.meta.slot - a.meta.slot);
  const from = config.before ? visible.findIndex(([sig]) => sig === config.before) + 1 : 0;
  const to = config.until ? visible.findIndex(([sig]) => sig === config.until) : -1;
  const page = visible.slice(from, to >= 0 ? to : undefined).slice(0, limit);
  return {
    result: page.map(([signature, s]) => ({
      blockTime: s.meta.blockTimeSeconds,
      confirmationStatus: s.commitment,
      err: s.meta.err,
      memo: memoOf(s.tx),
      signature,
      slot: s.meta.slot,
    })),
  };
}

function accountKeys(stored: Stored): string[] {
  const loaded = stored.meta.loadedAddresses ?? { writable: [], readonly: [] };
  return [...stored.tx.message.staticAccountKeys.map((k) => k.toBase58()), ...loaded.writable, ...loaded.readonly];
}

/** The node's memo field: each memo instruction's text as "[length] text", joined by "; ". */
function memoOf(tx: VersionedTransaction): string | null {
  const keys = tx.message.staticAccountKeys;
  const memos = tx.message.compiledInstructions
    .filter((ix) => MEMO_PROGRAMS.has(keys[ix.programIdIndex]?.toBase58() ?? ""))
    .map((ix) => `[${ix.data.length}] ${new TextDecoder().decode(ix.data)}`);
  return memos.length ? memos.join("; ") : null;
}
