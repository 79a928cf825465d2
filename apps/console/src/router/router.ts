import { useSyncExternalStore } from "react";

/** Where the console is mounted: the control plane serves it there (and index.html for every path below). */
export const BASE = "/app";

/** The console's own path ("/nodes") from the browser's, and the query. */
function current(): string {
  const { pathname, search } = window.location;
  const inside = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  return (inside || "/") + search;
}

function subscribe(onChange: () => void) {
  window.addEventListener("popstate", onChange);
  return () => window.removeEventListener("popstate", onChange);
}

/** The console path and query now ("/nodes?region=eu-west"), re-rendering on every navigation. */
export function useLocation(): { path: string; query: URLSearchParams } {
  const full = useSyncExternalStore(subscribe, current);
  const [path = "/", search = ""] = full.split("?", 2);
  return { path, query: new URLSearchParams(search) };
}

/** Goes to a console path ("/deployments/dep_1"), as a link would; `replace` keeps the history as it is (filters). */
export function navigate(to: string, options: { replace?: boolean } = {}) {
  const url = BASE + (to.startsWith("/") ? to : `/${to}`);
  if (options.replace) window.history.replaceState(null, "", url);
  else window.history.pushState(null, "", url);
  window.dispatchEvent(new PopStateEvent("popstate"));
}

/**
 * Matches a console path against a pattern with `:name` segments ("/deployments/:id"):
 * the decoded parameters, or undefined when it does not match.
 */
export function matchPath(pattern: string, path: string): Record<string, string> | undefined {
  const want = pattern.split("/").filter(Boolean);
  const have = path.split("/").filter(Boolean);
  if (want.length !== have.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i]!;
    const h = have[i]!;
    if (w.startsWith(":")) params[w.slice(1)] = decodeURIComponent(h);
    else if (w !== h) return undefined;
  }
  return params;
}
