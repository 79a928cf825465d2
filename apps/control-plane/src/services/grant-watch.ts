import type { Repos } from "@cm/db";
import type { AccessGrant } from "./auth-service";
import type { EventBus } from "./events";
import type { Clock } from "./ids";
import type { Logger } from "./logger";

/** Why a connection's sign-in is over, in the API's words (an error code and a message for people). */
export type GrantEnd = { code: "UNAUTHORIZED" | "TOKEN_EXPIRED" | "API_KEY_EXPIRED"; message: string };

export const GRANT_REVOKED: GrantEnd = {
  code: "UNAUTHORIZED",
  message: "the sign-in or API key that opened this connection was ended (signed out, tokens revoked, or the key deleted): sign in again",
};
export const GRANT_EXPIRED: GrantEnd = {
  code: "TOKEN_EXPIRED",
  message: "the access token that opened this connection has expired: refresh it (POST /auth/refresh) and reconnect",
};
export const API_KEY_EXPIRED: GrantEnd = {
  code: "API_KEY_EXPIRED",
  message: "the API key that opened this connection has expired: create a new one and reconnect",
};
const expired = (g: AccessGrant) => (g.apiKey ? API_KEY_EXPIRED : GRANT_EXPIRED);

export type GrantWatchOptions = {
  repos: Repos;
  events: EventBus;
  clock: Clock;
  log: Logger;
  /** How often the database is asked which held tokens were revoked: how late a sign-out on another replica is noticed. */
  checkMs: number;
};

/** A connection's hold on the grant it was opened with. */
export interface GrantHold {
  /** Moves the hold to a fresh grant of the same account (an exec session's `renew`): it lasts until that one expires. */
  renew(grant: AccessGrant): void;
  /** The connection is over: nothing more is watched for it. */
  release(): void;
}

type Held = { grant: AccessGrant; end(why: GrantEnd): void; timer?: NodeJS.Timeout };

/** Tokens per query: well under every database's limit on bound parameters. */
const CHECK_BATCH = 500;
/** setTimeout's longest wait; a later expiry is waited for in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Ends what a sign-in opened (streams, exec sessions) once the sign-in is over,
 * since a connection outlives the check of the request that opened it: at its
 * access token's expiry (unless renewed), at once when this process revokes the
 * token's family (sign-out, a refresh token used twice), and within `checkMs`
 * when the database says the token is revoked, whoever revoked it: the
 * database is the truth every replica shares.
 */
export class GrantWatch {
  private readonly held = new Set<Held>();
  private stopTicker: (() => void) | undefined;
  private checking = false;

  constructor(private readonly o: GrantWatchOptions) {
    o.events.on("family-revoked", (familyId) => {
      for (const h of [...this.held]) if (h.grant.familyId === familyId) this.finish(h, GRANT_REVOKED);
    });
  }

  /** Watches `grant` for a connection; `end` is called once (and the hold released) when its sign-in is over. */
  hold(grant: AccessGrant, end: (why: GrantEnd) => void): GrantHold {
    const h: Held = { grant, end };
    this.held.add(h);
    this.arm(h);
    this.stopTicker ??= this.o.clock.every(this.o.checkMs, () => void this.check());
    return {
      renew: (fresh) => {
        if (!this.held.has(h)) return;
        h.grant = fresh;
        this.arm(h);
      },
      release: () => this.drop(h),
    };
  }

  /** Connections held now. */
  get size(): number {
    return this.held.size;
  }

  close() {
    for (const h of [...this.held]) this.drop(h);
  }

  private arm(h: Held) {
    clearTimeout(h.timer);
    const ms = Math.min(Math.max(0, h.grant.expiresAt - this.o.clock.now()), MAX_TIMER_MS);
    // The clock decides, not the timer: a clock a test moves, or a long wait in steps.
    h.timer = setTimeout(() => (h.grant.expiresAt <= this.o.clock.now() ? this.finish(h, expired(h.grant)) : this.arm(h)), ms);
  }

  private drop(h: Held) {
    clearTimeout(h.timer);
    this.held.delete(h);
    if (this.held.size === 0 && this.stopTicker) {
      this.stopTicker();
      this.stopTicker = undefined;
    }
  }

  private finish(h: Held, why: GrantEnd) {
    if (!this.held.has(h)) return;
    this.drop(h);
    h.end(why);
  }

  private async check() {
    if (this.checking) return;
    this.checking = true;
    try {
      const now = this.o.clock.now();
      for (const h of [...this.held]) if (h.grant.expiresAt <= now) this.finish(h, expired(h.grant));
      const hashes = [...new Set([...this.held].map((h) => h.grant.tokenHash))];
      const revoked = new Set<string>();
      for (let i = 0; i < hashes.length; i += CHECK_BATCH) {
        for (const t of await this.o.repos.auth.revokedAmong(hashes.slice(i, i + CHECK_BATCH))) revoked.add(t);
      }
      // A hold renewed meanwhile has another token now, and is judged at the next check.
      for (const h of [...this.held]) if (revoked.has(h.grant.tokenHash)) this.finish(h, GRANT_REVOKED);
    } catch (err) {
      // A database that does not answer cuts nobody off: the next check asks again.
      this.o.log.warn("could not check the sign-ins of open connections", { err });
    } finally {
      this.checking = false;
    }
  }
}
