import type { ErrorCode } from "@cm/protocol";

/** What every error this SDK throws has: a stable code to branch on. */
export class CmError extends Error {
  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The API answered with an error body: `code` is one of the API's error codes. */
export class ApiError extends CmError {
  declare readonly code: ErrorCode | `HTTP_${number}`;
  constructor(
    code: ErrorCode | `HTTP_${number}`,
    message: string,
    readonly status: number,
    readonly requestId: string | undefined,
    readonly details: unknown,
    /** Seconds, from Retry-After, where the API said how long to wait. */
    readonly retryAfterS?: number,
  ) {
    super(code, message);
  }
}

/** The API could not be reached or the connection broke: nothing was answered. */
export class NetworkError extends CmError {
  constructor(
    readonly url: string,
    cause: unknown,
  ) {
    super("NETWORK_ERROR", `cannot reach ${url}: ${describeCause(cause)}`, { cause });
  }
}

/** No session to call a protected route with, or one that can no longer be refreshed: sign in again. */
export class SessionError extends CmError {
  declare readonly code: "NOT_SIGNED_IN" | "SESSION_EXPIRED";
}

/** waitFor gave up: the time ran out, or the deployment ended in a status that was not awaited. */
export class WaitError extends CmError {
  declare readonly code: "WAIT_TIMEOUT" | "DEPLOYMENT_ENDED";
  constructor(
    code: "WAIT_TIMEOUT" | "DEPLOYMENT_ENDED",
    message: string,
    /** The deployment as last seen. */
    readonly deployment: unknown,
  ) {
    super(code, message);
  }
}

/** waitForDeposit gave up: the time ran out, or the deposit expired with nothing credited. */
export class DepositWaitError extends CmError {
  declare readonly code: "WAIT_TIMEOUT" | "DEPOSIT_EXPIRED";
  constructor(
    code: "WAIT_TIMEOUT" | "DEPOSIT_EXPIRED",
    message: string,
    /** The deposit as last seen. */
    readonly deposit: unknown,
  ) {
    super(code, message);
  }
}

/** waitForPayout gave up: the payout was neither paid nor failed in time (it goes on without the wait). */
export class PayoutWaitError extends CmError {
  declare readonly code: "WAIT_TIMEOUT";
  constructor(
    message: string,
    /** The payout as last seen. */
    readonly payout: unknown,
  ) {
    super("WAIT_TIMEOUT", message);
  }
}

/** The chain refused or did not confirm a payment (the API was not told of it). */
export class ChainError extends CmError {
  declare readonly code: "CHAIN_UNAVAILABLE" | "TX_REJECTED" | "TX_NOT_CONFIRMED" | "CHAIN_LIBRARIES_MISSING";
}

// Node's fetch hides the reason (ECONNREFUSED, ENOTFOUND) in cause.code; a browser's says "Failed to fetch".
function describeCause(cause: unknown): string {
  const inner = (cause as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
  if (inner && typeof inner.code === "string") return inner.code;
  if (inner && typeof inner.message === "string" && inner.message) return inner.message;
  return cause instanceof Error ? cause.message : String(cause);
}
