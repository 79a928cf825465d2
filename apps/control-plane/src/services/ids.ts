import { createHash, randomBytes } from "node:crypto";

/** Ids carry a prefix so a stray one in a log says what it names (`dep_...`, `node_...`). */
export type IdGenerator = (prefix: string) => string;
export const randomId: IdGenerator = (prefix) => `${prefix}_${randomBytes(12).toString("base64url")}`;

/** A bearer secret: 32 random bytes, shown once, stored only as its SHA-256. */
export const newSecret = (prefix: string) => `${prefix}_${randomBytes(32).toString("base64url")}`;
export const hashSecret = (secret: string) => createHash("sha256").update(secret).digest("hex");

/**
 * Time as a dependency: what reads the time and what runs on a period (liveness,
 * leases, metering, the streams' fallback read) take both from one clock, so a
 * test can move them together without sleeping.
 */
export interface Clock {
  now(): number;
  /** Calls `fn` every `ms` until the returned function is called; never what keeps the process alive. */
  every(ms: number, fn: () => void): () => void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  every: (ms, fn) => {
    const timer = setInterval(fn, ms);
    timer.unref();
    return () => clearInterval(timer);
  },
};
