import { z } from "zod";
import { CONTROL_CHARACTERS, hasControlCharacter } from "../control-characters";
import { ERROR_CODES, type ErrorCode } from "../errors";

export const ErrorBody = z
  .object({
    error: z.object({
      code: z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]),
      message: z.string(),
      requestId: z.string(),
      details: z.unknown().optional(),
    }),
  })
  .meta({ id: "Error" });
export type ErrorBody = z.infer<typeof ErrorBody>;

/** The answer of an action that returns nothing else (a sign-out, a delete, a retirement): one shape for all of them. */
export const SuccessResponse = z.object({ success: z.boolean(), message: z.string() }).meta({ id: "SuccessResponse" });
export type SuccessResponse = z.infer<typeof SuccessResponse>;

export const Pagination = z
  .object({ page: z.number().int(), limit: z.number().int(), total: z.number().int(), totalPages: z.number().int() })
  .meta({ id: "Pagination" });
export type Pagination = z.infer<typeof Pagination>;

/**
 * Query values arrive as strings. A number is read only from plain decimal
 * digits: "1e2", "0x10", " 3" and "" are refused (z.coerce.number reads them
 * all), and so is "1.0" where a whole number is wanted. The document shows the
 * inner schema: a number with its bounds.
 */
export const queryInteger = <S extends z.ZodNumber>(schema: S) => z.preprocess(decimal(/^-?\d+$/), schema);
export const queryNumber = <S extends z.ZodNumber>(schema: S) => z.preprocess(decimal(/^-?\d+(\.\d+)?$/), schema);
const decimal = (pattern: RegExp) => (value: unknown) => (typeof value === "string" && pattern.test(value) ? Number(value) : value);

export const pageQuery = (maxLimit: number) => ({
  page: queryInteger(z.number().int().min(1).max(Number.MAX_SAFE_INTEGER)).default(1),
  // Past the maximum is a 400 naming `limit`, as the document's `maximum` says: a
  // client that asked for more than it gets would read a short page as the last one.
  limit: queryInteger(z.number().int().min(1).max(maxLimit))
    .default(20)
    .meta({ description: `default 20, at most ${maxLimit}` }),
});

/** "true" or "false" (or "1", "0") in a query string, a boolean in the document; z.coerce.boolean would take "false" as true. */
export const queryBoolean = z
  .preprocess((v) => (v === "true" || v === "1" ? true : v === "false" || v === "0" ? false : v), z.boolean())
  .meta({ description: "true or false; 1 and 0 are read the same" });

// The same rule for the document, as a JSON Schema pattern: any character but NUL and a surrogate, or a surrogate pair.
const STORABLE = "(?:[^\\u0000\\uD800-\\uDFFF]|[\\uD800-\\uDBFF][\\uDC00-\\uDFFF])*";

/**
 * Text we store: no NUL (PostgreSQL's text cannot hold it, and a container
 * given one in its environment fails to start) and no unpaired surrogate (not
 * UTF-8, so no database can hold it faithfully). Refused with a 400 naming the
 * field, the same on SQLite and PostgreSQL.
 */
export const text = () =>
  z
    .string()
    .refine((value) => !value.includes("\0") && !LONE_SURROGATE.test(value), "must not contain NUL characters or unpaired surrogates")
    .meta({ pattern: `^${STORABLE}$` });
// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const CONTROL_CHARACTER_MESSAGE = "must not contain control characters (C0, DEL, C1) or bidirectional overrides";
// NUL is text()'s to refuse: one message per fault.
const printable = (value: string) => value.includes("\0") || !hasControlCharacter(value);
// STORABLE less the control characters.
const PRINTABLE = `(?:[^${CONTROL_CHARACTERS}\\uD800-\\uDFFF]|[\\uD800-\\uDBFF][\\uDC00-\\uDFFF])*`;

/**
 * A name: text, trimmed, that must keep a character (so the document's pattern asks for one that is not white space),
 * and with no control character: names are shown in tenants' terminals and tables, where one would act (see
 * CONTROL_CHARACTERS).
 */
export const nameText = (max: number) =>
  text()
    .trim()
    .min(1)
    .max(max)
    .refine(printable, CONTROL_CHARACTER_MESSAGE)
    .meta({ pattern: `^(?=[\\s\\S]*\\S)${PRINTABLE}$` });

/** Labels a machine reports of itself (a CPU model, a GPU's name): storable, and free of control characters like names. */
export const labelText = (max: number) =>
  text()
    .max(max)
    .refine(printable, CONTROL_CHARACTER_MESSAGE)
    .meta({ pattern: `^${PRINTABLE}$` });

/** The largest value of the integer columns query filters are compared with (PostgreSQL's integer). */
export const INT32_MAX = 2_147_483_647;

export const Timestamp = z.string().meta({ format: "date-time", description: "ISO 8601, UTC" });

/**
 * A deployment's env in all. Every spec the node's agent is sent carries it, and
 * a node runs up to its maxDeployments at once: bounding each keeps every frame
 * far below the agent's limit (AGENT_MAX_INBOUND_FRAME_BYTES). Linux itself
 * caps one variable at 128 KiB and a process's whole env near 2 MiB.
 */
export const ENV_MAX_TOTAL_BYTES = 64 * 1024;
/** What an env weighs on the wire and in the container: NAME=value per variable, UTF-8. */
export const envBytes = (env: Record<string, string>) => Object.entries(env).reduce((sum, [k, v]) => sum + utf8Bytes(k) + 1 + utf8Bytes(v), 0);

// Runs in browsers too (the SDK parses with these schemas): no Buffer.
const utf8 = new TextEncoder();
export const utf8Bytes = (s: string) => utf8.encode(s).length;

/** Environment variables: bounded so a body cannot smuggle megabytes into a container. */
export const EnvMap = z
  .record(
    z
      .string()
      .min(1)
      .max(256)
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be a valid environment variable name"),
    text().max(32_768),
  )
  .refine((env) => Object.keys(env).length <= 100, "at most 100 variables")
  .refine((env) => envBytes(env) <= ENV_MAX_TOTAL_BYTES, `at most ${ENV_MAX_TOTAL_BYTES / 1024} KiB in all (names and values, UTF-8)`)
  .meta({
    description: `Environment variables, name to value (at most 100, values up to 32 KiB, ${ENV_MAX_TOTAL_BYTES / 1024} KiB in all)`,
    maxProperties: 100,
    propertyNames: { type: "string", minLength: 1, maxLength: 256, pattern: "^[A-Za-z_][A-Za-z0-9_]*$" },
  });

export function paginate(page: number, limit: number, total: number): Pagination {
  return { page, limit, total, totalPages: Math.ceil(total / limit) };
}
