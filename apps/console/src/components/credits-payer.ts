import type { Payer } from "@cm/sdk";
import {
  SolanaSignAndSendTransaction,
  type SolanaSignAndSendTransactionFeature,
  SolanaSignTransaction,
  type SolanaSignTransactionFeature,
} from "@solana/wallet-standard-features";
import type { Wallet, WalletAccount } from "@wallet-standard/base";
import { connect, type SignInWallet } from "../wallet/wallets";

/** The Solana RPC and the stablecoin's decimals the control plane names in the page (routes/console.ts), or undefined. */
export function chainSettings(): { rpcUrl: string | undefined; decimals: number | undefined } {
  const meta = (name: string) => document.querySelector<HTMLMetaElement>(`meta[name="${name}"]`)?.content || undefined;
  const decimals = meta("cm-stable-decimals");
  return { rpcUrl: meta("cm-solana-rpc"), decimals: decimals === undefined ? undefined : Number(decimals) };
}

/** The Wallet Standard chain a wallet sends on, from the RPC the payment goes through: a wallet sends on the cluster it is told. */
export function chainOf(rpcUrl: string): `solana:${string}` {
  const host = new URL(rpcUrl).hostname;
  if (host.includes("devnet")) return "solana:devnet";
  if (host.includes("testnet")) return "solana:testnet";
  if (host === "localhost" || host === "127.0.0.1" || host === "[::1]") return "solana:localnet";
  return "solana:mainnet";
}

/** Whether a wallet can pay a deposit from the page: it signs and sends, or signs, transactions. */
export function canPay(wallet: Wallet): boolean {
  return SolanaSignAndSendTransaction in wallet.features || SolanaSignTransaction in wallet.features;
}

/**
 * Connects `wallet` (no prompt when it already is) and answers the SDK's Payer over the account
 * of the signed-in address: the wallet signs and sends the transaction itself when it can
 * (solana:signAndSendTransaction, what wallets prefer), or signs it for the page to send. The
 * deposit must be paid by the wallet that signed in (PAYER_MISMATCH otherwise), so another
 * account is refused here, before anything is signed.
 */
export async function walletPayer(wallet: SignInWallet, address: string, rpcUrl: string): Promise<Payer> {
  await connect(wallet);
  const account: WalletAccount | undefined = wallet.accounts.find((a) => a.address === address);
  if (!account) {
    throw new Error(
      `${wallet.name} has no account ${address}, the wallet you signed in with: switch to that account in ${wallet.name}, or sign in again with this one.`,
    );
  }
  const chain = chainOf(rpcUrl);
  const features = wallet.features as Partial<SolanaSignAndSendTransactionFeature & SolanaSignTransactionFeature>;
  const signAndSend = features[SolanaSignAndSendTransaction];
  if (signAndSend && account.features.includes(SolanaSignAndSendTransaction)) {
    return {
      publicKey: address,
      signAndSendTransaction: async (transaction) => {
        const [output] = await signAndSend.signAndSendTransaction({ account, chain, transaction });
        if (!output) throw new Error(`${wallet.name} sent nothing`);
        return output.signature;
      },
    };
  }
  const sign = features[SolanaSignTransaction];
  if (sign && account.features.includes(SolanaSignTransaction)) {
    return {
      publicKey: address,
      signTransaction: async (tx) => {
        const [output] = await sign.signTransaction({ account, chain, transaction: (tx as { serialize(): Uint8Array }).serialize() });
        if (!output) throw new Error(`${wallet.name} signed nothing`);
        return output.signedTransaction;
      },
    };
  }
  throw new Error(`${wallet.name} cannot sign Solana transactions: pay by QR code instead.`);
}
