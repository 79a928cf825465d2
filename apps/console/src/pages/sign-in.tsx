import { Link } from "../router/link";
import type { PageDefinition } from "../router/pages";
import { SignInPrompt } from "../wallet/sign-in";
import { useWallet } from "../wallet/wallet-context";

function SignIn() {
  const { address } = useWallet();
  return (
    <>
      <h1>Sign in</h1>
      {address ? (
        <p className="signed-in">
          Signed in as <code>{address}</code>. Go on to <Link to="/deployments">your deployments</Link> or the <Link to="/nodes">catalogue</Link>.
        </p>
      ) : (
        <SignInPrompt />
      )}
    </>
  );
}

export const page: PageDefinition = { path: "/sign-in", title: "Sign in", component: SignIn };
