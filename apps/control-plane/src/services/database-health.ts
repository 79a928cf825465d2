import { isDatabaseUnavailable } from "@cm/db";
import type { Logger } from "./logger";

export type DatabaseHealthOptions = {
  /** Resolves once the database answers; rejects otherwise (DbHandle.ping). */
  ping(timeoutMs: number): Promise<void>;
  log: Logger;
  /** How often the database is asked while it is down (and, less often, while up). */
  probeMs: number;
};

/** Seconds a client is told to wait (Retry-After) while the database is down. */
export const DATABASE_RETRY_AFTER_S = 2;
const PING_TIMEOUT_MS = 1000;
const PROBES_WHILE_UP_EVERY = 5;

/**
 * Whether the database answers, known without asking it on every request: a
 * probe runs in the background (every probeMs while down, every few probeMs
 * while up), and any caller that meets an unreachable database says so at once.
 * While it is down, API calls fail fast with 503 instead of hanging on a query,
 * and GET /ready answers 503 so a load balancer sends traffic elsewhere.
 */
export class DatabaseHealth {
  private downSinceMs: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private probing: Promise<boolean> | undefined;
  private ticks = 0;

  constructor(private readonly o: DatabaseHealthOptions) {}

  get up(): boolean {
    return this.downSinceMs === undefined;
  }

  /** Records err if it says the database is unreachable; true when it did. */
  noteError(err: unknown): boolean {
    if (!isDatabaseUnavailable(err)) return false;
    this.markDown(err);
    return true;
  }

  /** Asks the database now (one question at a time, however many ask). */
  check(): Promise<boolean> {
    this.probing ??= this.o
      .ping(PING_TIMEOUT_MS)
      .then(() => {
        if (this.downSinceMs !== undefined) this.o.log.warn("database: answering again", { downMs: Date.now() - this.downSinceMs });
        this.downSinceMs = undefined;
        return true;
      })
      .catch((err: unknown) => {
        this.markDown(err);
        return false;
      })
      .finally(() => {
        this.probing = undefined;
      });
    return this.probing;
  }

  start() {
    this.timer ??= setInterval(() => {
      if (!this.up || ++this.ticks % PROBES_WHILE_UP_EVERY === 0) void this.check();
    }, this.o.probeMs);
    this.timer.unref();
  }

  stop() {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private markDown(err: unknown) {
    if (this.downSinceMs !== undefined) return;
    this.downSinceMs = Date.now();
    this.o.log.error("database: not answering; API calls answer 503 until it does", { err });
  }
}
