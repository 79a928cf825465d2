import type { ReactNode } from "react";
import { Link } from "../router/link";
import { useLocation } from "../router/router";
import { NAV } from "../router/routes";
import { WalletButton } from "../wallet/wallet-button";

/** The frame around every page: a skip link, the brand, the navigation, the wallet, and the page. */
export function Layout({ children }: { children: ReactNode }) {
  const { path } = useLocation();
  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <Link to="/" className="brand">
          Compute marketplace
        </Link>
        <nav aria-label="Main">
          <ul>
            {NAV.map((p) => {
              const here = p.path === "/" ? path === "/" : path === p.path || path.startsWith(`${p.path}/`);
              return (
                <li key={p.path}>
                  <Link to={p.path} aria-current={here ? "page" : undefined}>
                    {p.title}
                  </Link>
                </li>
              );
            })}
          </ul>
        </nav>
        <WalletButton />
      </header>
      <main id="main">{children}</main>
      <footer className="bottom">
        <a href="/docs">API documentation</a>
      </footer>
    </>
  );
}
