/**
 * A Wallet Standard wallet that signs in and pays, for the credits test: what test-wallet.ts
 * does (connect, solana:signMessage) and solana:signAndSendTransaction, which a wallet such as
 * Phantom prefers for payments. Like the test wallet it holds no key: it asks the test, through
 * functions the test exposed, to sign with the real ed25519 keypair the test holds, and to send
 * the signed transaction through the Solana RPC (as a wallet sends through its own).
 */
import {
  SolanaSignAndSendTransaction,
  type SolanaSignAndSendTransactionFeature,
  type SolanaSignAndSendTransactionInput,
  SolanaSignMessage,
  type SolanaSignMessageFeature,
  type SolanaSignMessageInput,
  SolanaSignTransaction,
  type SolanaSignTransactionFeature,
  type SolanaSignTransactionInput,
} from "@solana/wallet-standard-features";
import type { Wallet, WalletAccount } from "@wallet-standard/base";
import {
  StandardConnect,
  type StandardConnectFeature,
  StandardDisconnect,
  type StandardDisconnectFeature,
  StandardEvents,
  type StandardEventsFeature,
  type StandardEventsListeners,
} from "@wallet-standard/features";
import { ReadonlyWalletAccount, registerWallet } from "@wallet-standard/wallet";

declare global {
  interface Window {
    /** signOnly: the wallet offers solana:signTransaction instead of signAndSendTransaction, and the page sends. */
    cmPayWallet: { name: string; address: string; publicKey: number[]; signOnly: boolean };
    cmPayWalletSign(message: number[]): Promise<number[]>;
    /** Signs the serialized transaction with the test's key and sends it; the signature's bytes. */
    cmPayWalletSignAndSend(transaction: number[], chain: string): Promise<number[]>;
    /** Signs the serialized transaction with the test's key; the signed transaction's bytes. */
    cmPayWalletSignTransaction(transaction: number[]): Promise<number[]>;
  }
}

const CHAINS = ["solana:mainnet", "solana:devnet", "solana:localnet"] as const;
const ICON =
  "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAxNiAxNiI+PHJlY3Qgd2lkdGg9IjE2IiBoZWlnaHQ9IjE2IiBmaWxsPSIjMTY2NTM0Ii8+PC9zdmc+";

class PayingWallet implements Wallet {
  readonly version = "1.0.0" as const;
  readonly name: string;
  readonly icon = ICON as Wallet["icon"];
  readonly chains = CHAINS;
  #accounts: WalletAccount[] = [];
  readonly #account: WalletAccount;
  readonly #onChange: StandardEventsListeners["change"][] = [];
  readonly #signOnly: boolean;

  constructor(o: Window["cmPayWallet"]) {
    this.name = o.name;
    this.#signOnly = o.signOnly;
    this.#account = new ReadonlyWalletAccount({
      address: o.address,
      publicKey: new Uint8Array(o.publicKey),
      chains: CHAINS,
      features: [SolanaSignMessage, o.signOnly ? SolanaSignTransaction : SolanaSignAndSendTransaction],
    });
  }

  get accounts() {
    return this.#accounts;
  }

  get features(): StandardConnectFeature &
    StandardDisconnectFeature &
    StandardEventsFeature &
    SolanaSignMessageFeature &
    Partial<SolanaSignAndSendTransactionFeature & SolanaSignTransactionFeature> {
    const mine = (account: WalletAccount) => {
      if (account.address !== this.#account.address) throw new Error("not this wallet's account");
    };
    return {
      [StandardConnect]: { version: "1.0.0", connect: async () => this.#setAccounts([this.#account]) },
      [StandardDisconnect]: { version: "1.0.0", disconnect: async () => void this.#setAccounts([]) },
      [StandardEvents]: {
        version: "1.0.0",
        on: (_event, listener) => {
          const change = listener as StandardEventsListeners["change"];
          this.#onChange.push(change);
          return () => void this.#onChange.splice(this.#onChange.indexOf(change), 1);
        },
      },
      [SolanaSignMessage]: {
        version: "1.0.0",
        signMessage: (...inputs: readonly SolanaSignMessageInput[]) =>
          Promise.all(
            inputs.map(async ({ account, message }) => {
              mine(account);
              return { signedMessage: message, signature: new Uint8Array(await window.cmPayWalletSign(Array.from(message))) };
            }),
          ),
      },
      ...(this.#signOnly
        ? {
            [SolanaSignTransaction]: {
              version: "1.0.0",
              supportedTransactionVersions: ["legacy", 0],
              signTransaction: (...inputs: readonly SolanaSignTransactionInput[]) =>
                Promise.all(
                  inputs.map(async ({ account, transaction }) => {
                    mine(account);
                    return { signedTransaction: new Uint8Array(await window.cmPayWalletSignTransaction(Array.from(transaction))) };
                  }),
                ),
            },
          }
        : {
            [SolanaSignAndSendTransaction]: {
              version: "1.0.0",
              supportedTransactionVersions: ["legacy", 0],
              signAndSendTransaction: (...inputs: readonly SolanaSignAndSendTransactionInput[]) =>
                Promise.all(
                  inputs.map(async ({ account, transaction, chain }) => {
                    mine(account);
                    return { signature: new Uint8Array(await window.cmPayWalletSignAndSend(Array.from(transaction), chain)) };
                  }),
                ),
            },
          }),
    };
  }

  #setAccounts(accounts: WalletAccount[]) {
    this.#accounts = accounts;
    for (const listener of this.#onChange) listener({ accounts });
    return { accounts };
  }
}

registerWallet(new PayingWallet(window.cmPayWallet));
