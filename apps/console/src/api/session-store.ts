import type { Session, SessionStore } from "@cm/sdk";

/**
 * The SDK's session kept in the browser's localStorage, one per API origin (the console is
 * served from the API's own origin, so that is this page's). Why there, and why that is safe
 * enough, is in the README ("Web console"): in short, no script but the console's own may run
 * on this origin (CSP script-src 'self', nothing inline, nothing third-party), the access token
 * lives minutes, and signing out revokes the refresh token's whole family on the API.
 *
 * Listeners hear every change, this tab's (sign-in, a refresh, sign-out) and other tabs'.
 */
export class BrowserSessionStore implements SessionStore {
  readonly #key: string;
  readonly #storage: Storage;
  readonly #listeners = new Set<() => void>();

  constructor(options: { key?: string; storage?: Storage } = {}) {
    this.#key = options.key ?? "cm.session";
    this.#storage = options.storage ?? window.localStorage;
    window.addEventListener("storage", (e) => {
      if (e.key === this.#key || e.key === null) this.#emit();
    });
  }

  load(): Session | undefined {
    const text = this.#storage.getItem(this.#key);
    if (!text) return undefined;
    try {
      const session = JSON.parse(text) as Session;
      return typeof session.accessToken === "string" && typeof session.refreshToken === "string" ? session : undefined;
    } catch {
      return undefined; // written by something else: as good as none
    }
  }

  save(session: Session) {
    // The user is kept as sign-in answered it: a refresh answers tokens only.
    const user = session.user ?? this.load()?.user;
    this.#storage.setItem(this.#key, JSON.stringify({ ...session, user }));
    this.#emit();
  }

  clear() {
    this.#storage.removeItem(this.#key);
    this.#emit();
  }

  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #emit() {
    for (const l of this.#listeners) l();
  }
}
