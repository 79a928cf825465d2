import { Connection, PublicKey, SolanaJSONRPCError } from "@solana/web3.js";
import bs58 from "bs58";
import type { ChainClient, ChainCommitment } from "./chain-client";
import { toTransferFacts } from "./to-transfer-facts";
import { isTransactionSignature } from "./transaction-signature";

export { toTransferFacts } from "./to-transfer-facts";

export interface Web3ChainClientOptions {
  rpcUrl: string;
  commitment: ChainCommitment;
  /** Per HTTP request; past it the lookup answers `unavailable`. */
  requestTimeoutMs?: number;
}

const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

/** A ChainClient over a Solana JSON-RPC node, through @solana/web3.js. */
export function createWeb3ChainClient(options: Web3ChainClientOptions): ChainClient {
  const timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const timedFetch: typeof fetch = (input, init) => fetch(input, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  const connection = new Connection(options.rpcUrl, {
    commitment: options.commitment,
    fetch: timedFetch,
    // Native fetch pools its own sockets; web3's keep-alive agent would be dead weight.
    httpAgent: false,
    // web3 would otherwise sleep through up to four 429 retries inside one HTTP request
    // of ours; the caller retries `unavailable` on its own schedule instead.
    disableRetryOnRateLimit: true,
  });

  return {
    async getTransfer(signature) {
      // A malformed signature names no transaction; the node would only answer -32602.
      if (!isTransactionSignature(signature)) return { kind: "not_found" };
      try {
        const parsed = await connection.getParsedTransaction(signature, {
          commitment: options.commitment,
          // Without it the node refuses v0 transactions, which most wallets now send.
          maxSupportedTransactionVersion: 0,
        });
        if (parsed === null) return { kind: "not_found" };
        return { kind: "found", tx: toTransferFacts(parsed) };
      } catch (error) {
        return { kind: "unavailable", reason: describeRpcFailure(error, timeoutMs) };
      }
    },

    async signaturesFor(address, limit, until) {
      // A malformed address is named by no transaction; the node would only answer -32602.
      if (bs58.decodeUnsafe(address)?.length !== 32) return { kind: "found", signatures: [] };
      try {
        const listed = await connection.getSignaturesForAddress(new PublicKey(address), { limit, ...(until ? { until } : {}) }, options.commitment);
        // The node lists newest first; a payment is the oldest that pays.
        const signatures = listed.reverse().map((s) => ({
          signature: s.signature,
          slot: s.slot,
          failed: s.err != null,
          blockTimeMs: s.blockTime == null ? null : s.blockTime * 1000,
        }));
        return { kind: "found", signatures };
      } catch (error) {
        return { kind: "unavailable", reason: describeRpcFailure(error, timeoutMs) };
      }
    },
  };
}

/** One line for logs and the API's error details; never the raw stack. */
export function describeRpcFailure(error: unknown, timeoutMs: number): string {
  if (error instanceof SolanaJSONRPCError) return `RPC answered error ${String(error.code)}: ${error.message}`;
  if (!(error instanceof Error)) return `RPC request failed: ${String(error)}`;
  if (error.name === "TimeoutError" || error.name === "AbortError") return `RPC did not answer within ${timeoutMs} ms`;
  const cause: unknown = error.cause;
  const causeCode = cause instanceof Error && "code" in cause ? ` (${String(cause.code)})` : "";
  return `RPC request failed: ${error.message}${causeCode}`;
}
