import { Link } from "../router/link";
import type { PageDefinition } from "../router/pages";
import { useWallet } from "../wallet/wallet-context";

function Home() {
  const { address } = useWallet();
  return (
    <>
      <h1>Rent GPUs, run containers</h1>
      <p>Pick a node from the catalogue or start from a template; pay with USDC credits from your Solana wallet.</p>
      <ul className="cards">
        <li>
          <Link to="/nodes">Browse the node catalogue</Link>
        </li>
        <li>
          <Link to="/templates">Start from a template</Link>
        </li>
        <li>{address ? <Link to="/deployments">Your deployments</Link> : <Link to="/sign-in">Sign in with your wallet</Link>}</li>
      </ul>
    </>
  );
}

export const page: PageDefinition = { path: "/", title: "Home", component: Home };
