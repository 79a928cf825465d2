import type { Hook } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import type { z } from "zod";
import { ApiError } from "../errors";
import type { AppEnv } from "./env";

type Where = "body" | "query" | "path" | "header";

/**
 * zod issues as the per-field details of a VALIDATION_ERROR. zod reports
 * unknown keys as one issue on the object that holds them: each becomes a
 * detail naming its own field.
 */
export function validationError(where: Where, issues: z.core.$ZodIssue[]) {
  const details = issues.flatMap((i) =>
    i.code === "unrecognized_keys"
      ? i.keys.map((key) => ({ field: [...i.path, key].join("."), message: where === "query" ? "is not a known parameter" : "is not a known field" }))
      : [{ field: i.path.join("."), message: i.message }],
  );
  return new ApiError("VALIDATION_ERROR", `invalid ${where}: ${details.map((d) => `${d.field || where} ${d.message}`).join("; ")}`, details);
}

const WHERE: Record<string, Where> = { json: "body", query: "query", param: "path", header: "header" };

/** The routers' defaultHook: a request that fails its schema is a VALIDATION_ERROR naming each field. */
export const validationHook: Hook<unknown, AppEnv, string, undefined> = (result) => {
  if (!result.success) throw validationError(WHERE[result.target] ?? "body", result.error.issues);
};

const JSON_TYPE = /^application\/([a-z.+-]*\+)?json\b/i;

/**
 * In front of the library's body validator, which would answer a body in
 * another media type and one that does not parse with messages of its own:
 * 415 UNSUPPORTED_MEDIA_TYPE, 400 INVALID_JSON, and an empty body validated
 * as `{}` (so a missing body names the missing fields).
 */
export const readJsonBody: MiddlewareHandler<AppEnv> = async function readJsonBody(c, next) {
  const type = c.req.header("content-type") ?? "";
  const raw = await c.req.text();
  if (raw.length > 0) {
    if (type !== "" && !JSON_TYPE.test(type)) throw new ApiError("UNSUPPORTED_MEDIA_TYPE");
    try {
      JSON.parse(raw);
    } catch {
      throw new ApiError("INVALID_JSON", "the body is not valid JSON");
    }
  } else if (type !== "") {
    // The validator parses the cached text (c.req.json()); with no content type it reads nothing and validates {} itself.
    // (Hono types the cache by what it resolves to; it holds the promise.)
    (c.req.bodyCache as { text?: Promise<string> }).text = Promise.resolve("{}");
  }
  await next();
};
