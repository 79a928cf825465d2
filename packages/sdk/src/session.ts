import type { TokenPair, User } from "@cm/protocol";
import type { z } from "zod";

/** What signing in leaves: the token pair, and who it belongs to. */
export type Session = z.output<typeof TokenPair> & { user?: User };

/**
 * Where sessions live between calls: memory by default; the CLI keeps them in a
 * file per API URL, a browser app might use localStorage. Methods may be async.
 */
export interface SessionStore {
  load(): Session | undefined | Promise<Session | undefined>;
  save(session: Session): void | Promise<void>;
  clear(): void | Promise<void>;
}

export class MemorySessionStore implements SessionStore {
  #session: Session | undefined;
  constructor(session?: Session) {
    this.#session = session;
  }
  load() {
    return this.#session;
  }
  save(session: Session) {
    this.#session = session;
  }
  clear() {
    this.#session = undefined;
  }
}
