import { useEffect, useRef } from "react";
import { useSession } from "../api/api-context";
import { SignInPrompt } from "../wallet/sign-in";
import { matchPath, useLocation } from "./router";
import { PAGES } from "./routes";

/** The page the URL names (or "not found"); moves focus to its heading so a screen reader announces the new page. */
export function RouterOutlet() {
  const { path } = useLocation();
  const session = useSession();
  const heading = useRef<HTMLDivElement>(null);
  let found: { page: (typeof PAGES)[number]; params: Record<string, string> } | undefined;
  for (const page of PAGES) {
    const params = matchPath(page.path, path);
    if (params) {
      found = { page, params };
      break;
    }
  }
  const title = found?.page.title ?? "Not found";
  const first = useRef(true);
  useEffect(() => {
    document.title = `${title} · Compute marketplace`;
    // Not on the first load: the skip link and the navigation come first there, as on any page.
    if (first.current) first.current = false;
    else heading.current?.focus();
  }, [title]);

  return (
    <div ref={heading} tabIndex={-1} className="page">
      {!found ? (
        <>
          <h1>Not found</h1>
          <p>No page of the console is at {path}.</p>
        </>
      ) : found.page.signedIn && !session ? (
        <>
          <h1>{found.page.title}</h1>
          <SignInPrompt reason={`Sign in with your wallet to see ${found.page.title.toLowerCase()}.`} />
        </>
      ) : (
        <found.page.component params={found.params} />
      )}
    </div>
  );
}
