import { SolanaSignMessage, type SolanaSignMessageFeature } from "@solana/wallet-standard-features";
import { getWallets } from "@wallet-standard/app";
import type { Wallet, WalletAccount } from "@wallet-standard/base";
import { StandardConnect, type StandardConnectFeature, StandardDisconnect, type StandardDisconnectFeature } from "@wallet-standard/features";
import { useSyncExternalStore } from "react";

/** A wallet the console can sign in with: it connects and signs messages (Phantom, Solflare, Backpack, any standard one). */
export type SignInWallet = Wallet & { features: StandardConnectFeature & SolanaSignMessageFeature & Partial<StandardDisconnectFeature> };

export function canSignIn(wallet: Wallet): wallet is SignInWallet {
  return StandardConnect in wallet.features && SolanaSignMessage in wallet.features;
}

const registry = getWallets();
let snapshot: readonly SignInWallet[] = registry.get().filter(canSignIn);

function subscribe(onChange: () => void) {
  const refresh = () => {
    snapshot = registry.get().filter(canSignIn);
    onChange();
  };
  const offRegister = registry.on("register", refresh);
  const offUnregister = registry.on("unregister", refresh);
  return () => {
    offRegister();
    offUnregister();
  };
}

/** The standard wallets in the page that can sign in, as they register (an extension may register after the console loads). */
export function useSignInWallets(): readonly SignInWallet[] {
  return useSyncExternalStore(subscribe, () => snapshot);
}

/**
 * Connects (the wallet asks its user) and answers the first account that signs Solana messages.
 * `silent`: only if the wallet already trusts this site, asking nobody (after a reload).
 */
export async function connect(wallet: SignInWallet, options: { silent?: boolean } = {}): Promise<WalletAccount> {
  const { accounts } = await wallet.features[StandardConnect].connect(options.silent ? { silent: true } : undefined);
  const account = accounts.find((a) => a.features.includes(SolanaSignMessage)) ?? accounts[0];
  if (!account) throw new Error(`${wallet.name} connected no account`);
  return account;
}

export async function disconnect(wallet: SignInWallet): Promise<void> {
  await wallet.features[StandardDisconnect]?.disconnect();
}

/** The SDK's Signer over a wallet's account: the wallet signs, the key never leaves it. */
export function walletSigner(wallet: SignInWallet, account: WalletAccount) {
  return {
    publicKey: new Uint8Array(account.publicKey),
    signMessage: async (message: Uint8Array) => {
      const [output] = await wallet.features[SolanaSignMessage].signMessage({ account, message });
      if (!output) throw new Error(`${wallet.name} returned no signature`);
      return output.signature;
    },
  };
}
