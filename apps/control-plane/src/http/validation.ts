import type { Hook } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import type { z } from "zod";
import { ApiError } from "../errors";
import type { AppEnv } from "./env";

type Where = "body" | "query" | "path";

/** zod issues as the per-field details of a VALIDATION_ERROR. */
export function validationError(where: Where, issues: z.core.$ZodIssue[]) {
  return new ApiError(
    "VALIDATION_ERROR",
    `invalid ${where}: ` + issues.map((i) => `${i.path.join(".") || where} ${i.message}`).join("; "),
    issues.map((i) => ({ field: i.path.join("."), message: i.message })),
  );
}

const WHERE: Record<string, Where> = { json: "body", query: "query", param: "path" };

/** The routers' defaultHook: a request that fails its schema is a VALIDATION_ERROR naming each field. */
export const validationHook: Hook<unknown, AppEnv, string, undefined> = (result) => {
  if (!result.success) throw validationError(WHERE[result.target] ?? "body", result.error.issues);
};

const JSON_TYPE = /^application\/([a-z.+-]*\+)?json\b/i;

/**
 * In front of the library's body validator: a body in another media type is a
 * 415, one that does not parse an INVALID_JSON, and an empty one is validated
 * as `{}` (so a missing body names the missing fields).
 */
export const readJsonBody: MiddlewareHandler<AppEnv> = async function readJsonBody(c, next) {
  const type = c.req.header("content-type") ?? "";
  const raw = await c.req.text();
  let body: unknown = {};
  if (raw.length > 0) {
    if (type !== "" && !JSON_TYPE.test(type)) throw new ApiError("UNSUPPORTED_MEDIA_TYPE");
    try {
      body = JSON.parse(raw);
    } catch {
      throw new ApiError("INVALID_JSON", "the body is not valid JSON");
    }
  }
  // What the validator reads with c.req.json().
  c.req.bodyCache.json = Promise.resolve(body);
  await next();
};
