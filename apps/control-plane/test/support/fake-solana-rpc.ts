import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Transaction, TransactionError } from "@solana/web3.js";
import { VersionedTransaction } from "@solana/web3.js";
import bs58 from "bs58";
import type { FakeInnerInstructions, FakeTokenBalance, LandedTx, WireEncoding } from "./fake-rpc-wire-format";
import { encodeMeta, encodeTransaction, WIRE_ENCODINGS, wireStatus } from "./fake-rpc-wire-format";

export type { FakeInnerInstructions, FakeTokenBalance } from "./fake-rpc-wire-format";
export { uiTokenAmount } from "./fake-rpc-wire-format";

/**
 * A local Solana JSON-RPC node for tests: real HTTP on 127.0.0.1, answering in the
 * wire format of an Agave 2.x node, so @solana/web3.js's own response validation
 * checks every answer.
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
  /** Stores a signed transaction as landed; returns its signature (base58). */
  addTransaction(signedTx: Transaction | VersionedTransaction, meta: FakeTxMeta): string;
  setCommitment(signature: string, commitment: FakeCommitment): void;
  /** "refuse" closes the port (ECONNREFUSED); "http503" answers every request 503. */
  setDown(down: boolean, how?: "refuse" | "http503"): Promise<void>;
  setDelayMs(delayMs: number): void;
  /** Answer every call with this JSON-RPC error (e.g. -32005 "Node is behind"), or stop with null. */
  setRpcError(error: RpcError | null): void;
  /** Every JSON-RPC call received, oldest first. */
  calls: Array<{ method: string; params: unknown[] }>;
  close(): Promise<void>;
}

interface Stored extends LandedTx {
  meta: FakeTxMeta;
  commitment: FakeCommitment;
}
interface RpcError {
  code: number;
  message: string;
}
type RpcAnswer = { result: unknown } | { error: RpcError };

const CORE_VERSION = "2.2.16";
const BASE_SLOT = 330_000_000;
const BLOCKHASH = "4sGjMW1sUnHzSxGspuhpqLDx6wiyjNtZAMdL4VZHirAn";

export async function startFakeSolanaRpc(): Promise<FakeSolanaRpc> {
  const txs = new Map<string, Stored>();
  const calls: FakeSolanaRpc["calls"] = [];
  const timers = new Set<NodeJS.Timeout>();
  let delayMs = 0;
  let http503 = false;
  let rpcError: RpcError | null = null;

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
    send(res, Array.isArray(request) ? request.map(answer) : answer(request));
  }

  function answer(request: unknown): unknown {
    const { id = null, method, params = [] } = (request ?? {}) as { id?: unknown; method?: unknown; params?: unknown[] };
    calls.push({ method: String(method), params });
    return { jsonrpc: "2.0", ...(rpcError ? { error: rpcError } : dispatch(String(method), params)), id };
  }

  const currentSlot = () => Math.max(BASE_SLOT, ...[...txs.values()].map((s) => s.meta.slot + 32));
  const context = () => ({ apiVersion: CORE_VERSION, slot: currentSlot() });
  function dispatch(method: string, params: unknown[]): RpcAnswer {
    switch (method) {
      case "getTransaction":
        return getTransaction(txs, params);
      case "getSignatureStatuses": {
        const signatures = Array.isArray(params[0]) ? (params[0] as unknown[]) : [];
        return { result: { context: context(), value: signatures.map((s) => signatureStatus(txs.get(String(s)))) } };
      }
      case "getLatestBlockhash":
        return { result: { context: context(), value: { blockhash: BLOCKHASH, lastValidBlockHeight: currentSlot() - 20_000 } } };
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

  const listen = (port: number) => new Promise<void>((done) => server.listen(port, "127.0.0.1", done));
  const stop = () =>
    new Promise<void>((done) => {
      server.close(() => done());
      // Keep-alive sockets would otherwise hold close() open and keep serving.
      server.closeAllConnections();
    });
  await listen(0);
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    addTransaction(signedTx, meta) {
      // Round-trip through the wire bytes so legacy and v0 share one representation.
      const tx = VersionedTransaction.deserialize(signedTx.serialize());
      const signature = bs58.encode(tx.signatures[0] ?? new Uint8Array(64));
      txs.set(signature, { ...meta, tx, meta, commitment: meta.commitment ?? "finalized" });
      return signature;
    },
    setCommitment(signature, commitment) {
      const stored = txs.get(signature);
      if (stored) stored.commitment = commitment;
    },
    async setDown(down, how = "refuse") {
      http503 = down && how === "http503";
      if (how !== "refuse") return;
      if (down && server.listening) await stop();
      // Same port again, so clients holding the URL reconnect.
      if (!down && !server.listening) await listen(port);
    },
    setDelayMs(ms) {
      delayMs = ms;
    },
    setRpcError(error) {
      rpcError = error;
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
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
