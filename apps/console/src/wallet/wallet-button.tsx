import { Link } from "../router/link";
import { useWallet } from "./wallet-context";

/** The header's corner: the signed-in address and sign-out, or a way to sign in. */
export function WalletButton() {
  const { address, wallet, signOut } = useWallet();
  if (!address) {
    return (
      <Link to="/sign-in" className="button wallet-button">
        Sign in
      </Link>
    );
  }
  return (
    <div className="wallet-button">
      <span className="address" title={wallet ? `${address}, connected with ${wallet.name}` : address}>
        {short(address)}
      </span>
      <button type="button" onClick={() => void signOut()}>
        Sign out
      </button>
    </div>
  );
}

const short = (address: string) => `${address.slice(0, 4)}…${address.slice(-4)}`;
