import { type Client, createClient, type Session } from "@cm/sdk";
import { createContext, type ReactNode, useContext, useMemo, useSyncExternalStore } from "react";
import { BrowserSessionStore } from "./session-store";
import { sharedRefreshFetch } from "./shared-refresh";

interface Api {
  client: Client;
  store: BrowserSessionStore;
}

const ApiContext = createContext<Api | undefined>(undefined);

/** One SDK client for the whole console, talking to the origin that served it, its session in localStorage. */
export function ApiProvider({ children, baseUrl }: { children: ReactNode; baseUrl?: string }) {
  const api = useMemo(() => {
    const store = new BrowserSessionStore();
    return { store, client: createClient({ baseUrl: baseUrl ?? window.location.origin, store, fetch: sharedRefreshFetch(store) }) };
  }, [baseUrl]);
  return <ApiContext.Provider value={api}>{children}</ApiContext.Provider>;
}

function useApiContext(): Api {
  const api = useContext(ApiContext);
  if (!api) throw new Error("useApi() outside <ApiProvider>");
  return api;
}

/** The SDK client: `useApi().nodes.list(...)`; protected calls use the signed-in wallet's session. */
export function useApi(): Client {
  return useApiContext().client;
}

/** The session of the signed-in wallet (with its user), or undefined; re-renders when it changes, in any tab. */
export function useSession(): Session | undefined {
  const { store } = useApiContext();
  // load() parses each time: compare by the stored text's identity through a cache of the last one.
  return useSyncExternalStore(
    (onChange) => store.subscribe(onChange),
    () => cachedLoad(store),
  );
}

const last = new WeakMap<BrowserSessionStore, { token: string | undefined; session: Session | undefined }>();
function cachedLoad(store: BrowserSessionStore): Session | undefined {
  const session = store.load();
  const seen = last.get(store);
  if (seen && seen.token === session?.accessToken) return seen.session;
  last.set(store, { token: session?.accessToken, session });
  return session;
}
