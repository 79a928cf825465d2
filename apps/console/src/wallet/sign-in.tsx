import { ErrorNotice } from "../layout/error-notice";
import { Loading } from "../layout/loading";
import { useWallet } from "./wallet-context";
import { useSignInWallets } from "./wallets";

/** The wallets in the page to sign in with, one button each; what is happening while the wallet asks its user. */
export function SignInPrompt({ reason }: { reason?: string }) {
  const wallets = useSignInWallets();
  const { step, signIn } = useWallet();
  const busy = step.kind === "connecting" || step.kind === "signing";
  return (
    <section className="sign-in" aria-labelledby="sign-in-title">
      <h2 id="sign-in-title">Sign in with a Solana wallet</h2>
      {reason && <p>{reason}</p>}
      {wallets.length === 0 ? (
        <p>No Solana wallet was found in this browser. Install one that follows the Wallet Standard (Phantom, Solflare or Backpack), then reload this page.</p>
      ) : (
        <>
          <p>Your wallet signs a one-time message to prove the address is yours; it moves no funds, and your keys never leave the wallet.</p>
          <ul className="wallets">
            {wallets.map((w) => (
              <li key={w.name}>
                <button type="button" disabled={busy} onClick={() => void signIn(w)}>
                  <img src={w.icon} alt="" width={24} height={24} />
                  {w.name}
                </button>
              </li>
            ))}
          </ul>
        </>
      )}
      {step.kind === "connecting" && <Loading label={`Connecting to ${step.wallet}…`} />}
      {step.kind === "signing" && <Loading label={`Sign the message in ${step.wallet}…`} />}
      {step.kind === "failed" && <ErrorNotice error={step.error} />}
    </section>
  );
}
