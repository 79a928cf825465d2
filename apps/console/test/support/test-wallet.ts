/**
 * A Wallet Standard wallet for the browser tests, registered in the page before the console
 * loads (bundled by browser.ts and injected as an init script). It holds no key: it asks the
 * test, through the function the test exposed (`cmTestWalletSign`), to sign with the real
 * ed25519 keypair the test holds, as a real wallet asks its user and signs in its extension.
 */
import { SolanaSignMessage, type SolanaSignMessageFeature, type SolanaSignMessageInput } from "@solana/wallet-standard-features";
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
    /** Set by the test before this script runs: the wallet's name and its public key (base58 address and bytes). */
    cmTestWallet: { name: string; address: string; publicKey: number[] };
    /** Exposed by the test: the detached signature of the message, or a rejection when the test's user says no. */
    cmTestWalletSign(message: number[]): Promise<number[]>;
    /** Whether the user connected this wallet to the site before, as a wallet remembers across reloads (the test keeps it). */
    cmTestWalletTrusted(): Promise<boolean>;
    cmTestWalletTrust(): Promise<void>;
  }
}

const CHAINS = ["solana:mainnet", "solana:devnet", "solana:localnet"] as const;
// A plain square: the Wallet Standard wants a data: URL icon.
const ICON =
  "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAxNiAxNiI+PHJlY3Qgd2lkdGg9IjE2IiBoZWlnaHQ9IjE2IiBmaWxsPSIjMWQ0ZWQ4Ii8+PC9zdmc+";

class TestWallet implements Wallet {
  readonly version = "1.0.0" as const;
  readonly name: string;
  readonly icon = ICON as Wallet["icon"];
  readonly chains = CHAINS;
  #accounts: WalletAccount[] = [];
  readonly #account: WalletAccount;
  // "change" is the only event the Wallet Standard defines.
  readonly #onChange: StandardEventsListeners["change"][] = [];

  constructor(o: Window["cmTestWallet"]) {
    this.name = o.name;
    this.#account = new ReadonlyWalletAccount({ address: o.address, publicKey: new Uint8Array(o.publicKey), chains: CHAINS, features: [SolanaSignMessage] });
  }

  get accounts() {
    return this.#accounts;
  }

  get features(): StandardConnectFeature & StandardDisconnectFeature & StandardEventsFeature & SolanaSignMessageFeature {
    return {
      [StandardConnect]: {
        version: "1.0.0",
        // As a real wallet: a silent connect succeeds only for a site it was connected to before (here: since the test began).
        connect: async (input) => {
          if (input?.silent && !(await window.cmTestWalletTrusted())) return { accounts: [] };
          await window.cmTestWalletTrust();
          return this.#setAccounts([this.#account]);
        },
      },
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
              if (account.address !== this.#account.address) throw new Error("not this wallet's account");
              const signature = new Uint8Array(await window.cmTestWalletSign(Array.from(message)));
              return { signedMessage: message, signature };
            }),
          ),
      },
    };
  }

  #setAccounts(accounts: WalletAccount[]) {
    this.#accounts = accounts;
    for (const listener of this.#onChange) listener({ accounts });
    return { accounts };
  }
}

registerWallet(new TestWallet(window.cmTestWallet));
