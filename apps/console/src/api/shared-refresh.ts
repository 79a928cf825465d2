import type { BrowserSessionStore } from "./session-store";

/**
 * The SDK's fetch for a session that every tab of this browser shares (localStorage): the API
 * takes a refresh token spent twice for a stolen one and revokes the whole sign-in, so two tabs
 * whose access tokens expire together must not both spend the same one. Refreshes take a lock
 * across tabs (Web Locks); inside it, a tab whose refresh token another tab already rotated
 * takes the stored pair instead of spending its old token, and the new pair is stored before
 * the lock is let go.
 */
export function sharedRefreshFetch(store: BrowserSessionStore): typeof fetch {
  return async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (!new URL(url, window.location.href).pathname.endsWith("/auth/refresh") || !navigator.locks) return fetch(input, init);
    return navigator.locks.request("cm.session.refresh", async () => {
      const sent = refreshTokenOf(init?.body);
      const stored = store.load();
      if (stored && sent && stored.refreshToken !== sent) {
        const { user: _user, ...pair } = stored;
        return new Response(JSON.stringify(pair), { status: 200, headers: { "content-type": "application/json" } });
      }
      const res = await fetch(input, init);
      const text = await res.text();
      if (res.ok) store.save(JSON.parse(text));
      return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
    });
  };
}

function refreshTokenOf(body: BodyInit | null | undefined): string | undefined {
  if (typeof body !== "string") return undefined;
  try {
    const token = (JSON.parse(body) as { refreshToken?: unknown }).refreshToken;
    return typeof token === "string" ? token : undefined;
  } catch {
    return undefined;
  }
}
