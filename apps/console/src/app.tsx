import { ApiProvider } from "./api/api-context";
import { Layout } from "./layout/layout";
import { RouterOutlet } from "./router/outlet";
import { WalletProvider } from "./wallet/wallet-context";

/** The whole console: one SDK client, the wallet, the layout around the page the URL names. */
export function App() {
  return (
    <ApiProvider>
      <WalletProvider>
        <Layout>
          <RouterOutlet />
        </Layout>
      </WalletProvider>
    </ApiProvider>
  );
}
