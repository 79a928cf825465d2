import { createContext, type ReactNode, useCallback, useContext, useEffect, useMemo, useState } from "react";
import { useApi, useSession } from "../api/api-context";
import { connect, disconnect, type SignInWallet, useSignInWallets, walletSigner } from "./wallets";

/** Which wallet signed in, by name, so a reload can reconnect it without asking (the session itself is in the API context's store). */
const WALLET_KEY = "cm.wallet";

type Step = { kind: "idle" } | { kind: "connecting"; wallet: string } | { kind: "signing"; wallet: string } | { kind: "failed"; error: unknown };

interface WalletState {
  /** The signed-in wallet's address (from the session, so it survives a reload without asking the wallet). */
  address: string | undefined;
  /** The wallet connected in this page: after a reload, the one that signed in, reconnected silently when it still trusts this site. */
  wallet: SignInWallet | undefined;
  step: Step;
  /** Connects `wallet`, has it sign the API's sign-in message, and keeps the session. */
  signIn(wallet: SignInWallet): Promise<void>;
  /** Revokes the session on the API, forgets it here, and disconnects the wallet. */
  signOut(): Promise<void>;
}

const WalletContext = createContext<WalletState | undefined>(undefined);

export function WalletProvider({ children }: { children: ReactNode }) {
  const client = useApi();
  const session = useSession();
  const [wallet, setWallet] = useState<SignInWallet | undefined>();
  const [step, setStep] = useState<Step>({ kind: "idle" });

  const signIn = useCallback(
    async (w: SignInWallet) => {
      try {
        setStep({ kind: "connecting", wallet: w.name });
        const account = await connect(w);
        setWallet(w);
        setStep({ kind: "signing", wallet: w.name });
        await client.auth.signIn(walletSigner(w, account));
        localStorage.setItem(WALLET_KEY, w.name);
        setStep({ kind: "idle" });
      } catch (error) {
        setStep({ kind: "failed", error });
      }
    },
    [client],
  );

  const signOut = useCallback(async () => {
    try {
      await client.auth.signOut();
    } catch (error) {
      // The session is forgotten here all the same (the SDK clears it before throwing).
      setStep({ kind: "failed", error });
    }
    localStorage.removeItem(WALLET_KEY);
    if (wallet) await disconnect(wallet).catch(() => undefined);
    setWallet(undefined);
  }, [client, wallet]);

  const address = session?.user?.walletAddress;

  // After a reload the session is there but no wallet is connected: reconnect the one that signed in, silently, once it
  // registers (an extension may register after the page loads), and only with the signed-in account.
  const wallets = useSignInWallets();
  const remembered = address ? wallets.find((w) => w.name === localStorage.getItem(WALLET_KEY)) : undefined;
  useEffect(() => {
    if (!remembered || wallet) return;
    let current = true;
    connect(remembered, { silent: true }).then(
      (account) => current && account.address === address && setWallet(remembered),
      () => undefined, // it asks to be asked: the user connects it when a page needs it
    );
    return () => {
      current = false;
    };
  }, [remembered, wallet, address]);
  const value = useMemo(() => ({ address, wallet, step, signIn, signOut }), [address, wallet, step, signIn, signOut]);
  return <WalletContext.Provider value={value}>{children}</WalletContext.Provider>;
}

export function useWallet(): WalletState {
  const state = useContext(WalletContext);
  if (!state) throw new Error("useWallet() outside <WalletProvider>");
  return state;
}
