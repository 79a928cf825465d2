import { ERROR_CODES, type ErrorCode } from "@cm/protocol";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { AppEnv } from "./http/env";

/** The one way a route fails: a stable code, a human message, optional details. */
export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message?: string,
    readonly details?: unknown,
    readonly headers: Record<string, string> = {},
  ) {
    super(message ?? ERROR_CODES[code].description);
    this.status = ERROR_CODES[code].status;
  }
}

export function errorResponse(c: Context<AppEnv>, err: ApiError) {
  for (const [k, v] of Object.entries(err.headers)) c.header(k, v);
  const body = {
    error: { code: err.code, message: err.message, requestId: c.get("requestId") ?? "unknown", ...(err.details !== undefined ? { details: err.details } : {}) },
  };
  return c.json(body, err.status as 400);
}

// What Hono's own middleware throws (the body limit, the validators' media-type check) in our codes.
const HTTP_EXCEPTION_CODES: Partial<Record<number, ErrorCode>> = {
  401: "UNAUTHORIZED",
  404: "NOT_FOUND",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
};

/**
 * app.onError: every throw becomes the one error shape; unknown throws are
 * logged and hidden. `unavailable` turns a database that cannot be reached
 * into its own answer (503 with Retry-After) rather than an internal error.
 */
export function onError(err: Error, c: Context<AppEnv>, unavailable?: (err: unknown) => ApiError | undefined) {
  if (err instanceof ApiError) return errorResponse(c, err);
  const down = unavailable?.(err);
  if (down) return errorResponse(c, down);
  if (err instanceof HTTPException) {
    const code = HTTP_EXCEPTION_CODES[err.status];
    return errorResponse(c, code ? new ApiError(code) : new ApiError("VALIDATION_ERROR", err.message || undefined));
  }
  c.get("log")?.error("unhandled error", { err });
  return errorResponse(c, new ApiError("INTERNAL_ERROR"));
}
