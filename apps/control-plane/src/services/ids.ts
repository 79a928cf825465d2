import { createHash, randomBytes } from "node:crypto";

/** Ids carry a prefix so a stray one in a log says what it names (`dep_...`, `node_...`). */
export type IdGenerator = (prefix: string) => string;
export const randomId: IdGenerator = (prefix) => `${prefix}_${randomBytes(12).toString("base64url")}`;

/** A bearer secret: 32 random bytes, shown once, stored only as its SHA-256. */
export const newSecret = (prefix: string) => `${prefix}_${randomBytes(32).toString("base64url")}`;
export const hashSecret = (secret: string) => createHash("sha256").update(secret).digest("hex");

export type Clock = { now(): number };
export const systemClock: Clock = { now: () => Date.now() };
