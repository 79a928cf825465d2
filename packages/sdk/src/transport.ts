import type { ErrorBody } from "@cm/protocol";
import { ApiError, NetworkError, SessionError } from "./errors";
import { call } from "./routes";
import { MemorySessionStore, type Session, type SessionStore } from "./session";
import type { TokenPair } from "./types";

export interface ClientOptions {
  /** The control plane, e.g. https://api.example.com or http://127.0.0.1:8080. */
  baseUrl: string;
  /** Where the session is kept; memory by default. */
  store?: SessionStore;
  /** Refresh the access token when it has less than this left (default 60 s). */
  refreshBeforeMs?: number;
  /**
   * An API key (cmk_..., from POST /auth/api-keys or `cm auth keys create`) to send instead of a
   * session: no sign-in, no refresh, and only the routes its scopes allow (others throw ApiError
   * INSUFFICIENT_SCOPE). In Node, `apiKey: process.env.CM_API_KEY` is what cm does.
   */
  apiKey?: string;
  fetch?: typeof fetch;
  now?: () => number;
}

export type Query = Record<string, string | number | boolean | undefined>;
export interface RequestOptions {
  query?: Query;
  body?: unknown;
  /** Send the session's bearer token (refreshing it first when it is about to expire). */
  auth?: boolean;
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

/** HTTP to the control plane: URLs, JSON, the error shape, and the session's tokens. */
export class Transport {
  readonly baseUrl: string;
  readonly store: SessionStore;
  readonly #fetch: typeof fetch;
  readonly #now: () => number;
  readonly #refreshBeforeMs: number;
  readonly #apiKey: string | undefined;
  #refreshing: Promise<Session> | undefined;

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.store = options.store ?? new MemorySessionStore();
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.#now = options.now ?? Date.now;
    this.#refreshBeforeMs = options.refreshBeforeMs ?? 60_000;
    this.#apiKey = options.apiKey || undefined;
  }

  /** Whether protected calls send an API key rather than the stored session. */
  get usesApiKey(): boolean {
    return this.#apiKey !== undefined;
  }

  /** A JSON call; resolves the parsed body of a 2xx, throws ApiError, NetworkError or SessionError. */
  async json<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const res = await this.send(method, path, options);
    return (await res.json()) as T;
  }

  /** The response of a 2xx as it is (a stream's body to read); errors as json() throws them. */
  async send(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    if (!options.auth) return this.#checked(await this.#once(method, path, options, undefined));
    // A key is not refreshed: its 401 (deleted, expired) or 403 (scope) is the answer.
    if (this.#apiKey) return this.#checked(await this.#once(method, path, options, this.#apiKey));
    let token = (await this.#session()).accessToken;
    const first = await this.#once(method, path, options, token);
    if (first.status !== 401) return this.#checked(first);
    const error = await toApiError(first);
    // An access token that expired between our check and the server's: refresh once and retry.
    if (error.code !== "TOKEN_EXPIRED") throw error;
    token = (await this.refresh()).accessToken;
    return this.#checked(await this.#once(method, path, options, token));
  }

  /** Exchanges the stored refresh token for a new pair; concurrent callers share one exchange. */
  refresh(): Promise<Session> {
    this.#refreshing ??= (async () => {
      const current = await this.store.load();
      if (!current) throw new SessionError("NOT_SIGNED_IN", "not signed in: sign in first");
      try {
        const pair: TokenPair = await call(this, "post", "/auth/refresh", { body: { refreshToken: current.refreshToken } });
        const next: Session = { ...pair, ...(current.user ? { user: current.user } : {}) };
        await this.store.save(next);
        return next;
      } catch (err) {
        if (err instanceof ApiError && err.code === "INVALID_REFRESH_TOKEN") {
          await this.store.clear();
          throw new SessionError("SESSION_EXPIRED", "the session expired and cannot be refreshed: sign in again");
        }
        throw err;
      }
    })().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  /** The session's access token, refreshed first when it is about to expire (for a WebSocket, which fetch does not open). */
  async accessToken(): Promise<string> {
    return this.#apiKey ?? (await this.#session()).accessToken;
  }

  /**
   * How long a connection opened with the access token (an exec session) may
   * wait before it sends the control plane a fresh one: until the token is
   * within refreshBeforeMs of its expiry, or half its remaining life if that is
   * later (a token shorter-lived than refreshBeforeMs is not renewed in a loop).
   * Undefined when signed out, and with an API key.
   */
  async renewInMs(): Promise<number | undefined> {
    // A connection opened with a key lasts as the key does: there is nothing fresher to send.
    if (this.#apiKey) return undefined;
    const session = await this.store.load();
    if (!session) return undefined;
    const leftMs = session.expiresAt - this.#now();
    return Math.max(0, leftMs - this.#refreshBeforeMs, leftMs / 2);
  }

  async #session(): Promise<Session> {
    const session = await this.store.load();
    if (!session) throw new SessionError("NOT_SIGNED_IN", "not signed in: sign in first");
    if (session.expiresAt - this.#now() > this.#refreshBeforeMs) return session;
    return this.refresh();
  }

  async #once(method: string, path: string, options: RequestOptions, token: string | undefined): Promise<Response> {
    const url = this.url(path, options.query);
    const headers: Record<string, string> = { accept: "application/json", ...options.headers };
    if (token) headers.authorization = `Bearer ${token}`;
    let body: string | undefined;
    if (options.body !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(options.body);
    }
    try {
      return await this.#fetch(url, { method, headers, body, signal: options.signal });
    } catch (err) {
      if (options.signal?.aborted) throw err;
      throw new NetworkError(url, err);
    }
  }

  async #checked(res: Response): Promise<Response> {
    if (res.ok) return res;
    throw await toApiError(res);
  }

  url(path: string, query?: Query): string {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query ?? {})) if (value !== undefined) params.set(key, String(value));
    const search = params.size ? `?${params}` : "";
    return `${this.baseUrl}${path}${search}`;
  }
}

/** The API's one error shape; anything else (a proxy's HTML page) keeps its status as HTTP_<status>. */
export async function toApiError(res: Response): Promise<ApiError> {
  const requestId = res.headers.get("x-request-id") ?? undefined;
  const retryAfter = Number(res.headers.get("retry-after"));
  const text = await res.text().catch(() => "");
  let parsed: Partial<ErrorBody> | undefined;
  try {
    parsed = JSON.parse(text) as Partial<ErrorBody>;
  } catch {
    parsed = undefined;
  }
  const e = parsed?.error;
  if (e && typeof e.code === "string") {
    return new ApiError(e.code, e.message, res.status, e.requestId ?? requestId, e.details, retryAfter > 0 ? retryAfter : undefined);
  }
  const message = text.trim().slice(0, 200) || res.statusText || `HTTP ${res.status}`;
  return new ApiError(`HTTP_${res.status}`, message, res.status, requestId, undefined, retryAfter > 0 ? retryAfter : undefined);
}
