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
        return { kind: "ok", height: await connection.getBlockHeight("finalized") };
      } catch (error) {
        return unavailable(error);
      }
    },

    async status(signature) {
      try {
        const { value } = await connection.getSignatureStatuses([signature], { searchTransactionHistory: true });
        const s = value[0];
        if (!s) return { kind: "unknown" };
        const settled = s.confirmationStatus === "finalized" || (options.commitment === "confirmed" && s.confirmationStatus === "confirmed");
        if (!settled) return { kind: "landing" };
        return s.err ? { kind: "landed", failed: true, error: JSON.stringify(s.err) } : { kind: "landed", failed: false };
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
