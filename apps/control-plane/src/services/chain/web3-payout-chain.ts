import { Connection, SendTransactionError } from "@solana/web3.js";
import type { ChainCommitment } from "./chain-client";
import type { PayoutChain } from "./payout-chain";
import { describeRpcFailure } from "./web3-chain-client";

export interface Web3PayoutChainOptions {
  rpcUrl: string;
  commitment: ChainCommitment;
  requestTimeoutMs?: number;
}

/** A PayoutChain over a Solana JSON-RPC node, through @solana/web3.js. */
export function createWeb3PayoutChain(options: Web3PayoutChainOptions): PayoutChain {
  const timeoutMs = options.requestTimeoutMs ?? 10_000;
  const timedFetch: typeof fetch = (input, init) => fetch(input, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  const connection = new Connection(options.rpcUrl, { commitment: options.commitment, fetch: timedFetch, httpAgent: false, disableRetryOnRateLimit: true });
  const unavailable = (error: unknown) => ({ kind: "unavailable" as const, reason: describeRpcFailure(error, timeoutMs) });

  return {
    async latestBlockhash() {
      try {
        const { blockhash, lastValidBlockHeight } = await connection.getLatestBlockhash(options.commitment);
        return { kind: "ok", blockhash, lastValidBlockHeight };
      } catch (error) {
        return unavailable(error);
      }
    },

    async blockHeight() {
      try {
        // Finalized: once it is past a blockhash's last valid height, every block
        // that could have held the transaction is final, so "not found" is final too.
        // Height and slot from one answer: the status is then judged against this slot.
        const info = await connection.getEpochInfo("finalized");
        if (info.blockHeight === undefined) return { kind: "unavailable", reason: "the RPC node did not say its block height" };
        return { kind: "ok", height: info.blockHeight, slot: info.absoluteSlot };
      } catch (error) {
        return unavailable(error);
      }
    },

    async status(signature) {
      try {
        const { context, value } = await connection.getSignatureStatuses([signature], { searchTransactionHistory: true });
        const contextSlot = context.slot;
        const s = value[0];
        if (!s) return { kind: "unknown", contextSlot };
        // Money out is judged at finalized whatever SOLANA_COMMITMENT says: a confirmed block can still be dropped.
        if (s.confirmationStatus !== "finalized") return { kind: "landing", contextSlot };
        return s.err ? { kind: "landed", failed: true, error: JSON.stringify(s.err), contextSlot } : { kind: "landed", failed: false, contextSlot };
      } catch (error) {
        return unavailable(error);
      }
    },

    async send(signedTxBase64) {
      try {
        // No retries inside the node's forwarding (maxRetries 0): the sender sends again itself while the blockhash is valid.
        await connection.sendEncodedTransaction(signedTxBase64, { maxRetries: 0, preflightCommitment: options.commitment });
        return { kind: "sent" };
      } catch (error) {
        if (error instanceof SendTransactionError) return { kind: "refused", reason: error.transactionError.message };
        return unavailable(error);
      }
    },
  };
}
