import type { Context, Hono } from "hono";
import { z } from "zod";
import { text, type ErrorCode } from "@cm/protocol";
import { ApiError } from "../errors";
import type { AppEnv } from "./env";
import type { OpenApiRegistry } from "./openapi";

type Method = "get" | "post" | "put" | "delete";
type Schema = z.ZodType;

export type RouteSpec<Q extends Schema | undefined, B extends Schema | undefined> = {
  summary: string;
  tag: string;
  auth?: boolean;
  query?: Q;
  body?: B;
  response: Schema;
  status?: 200 | 201;
  errors?: ErrorCode[];
  description?: string;
  /** false for the few routes that never touch the database (liveness, readiness): no 503 gate in front. */
  database?: false;
};

type Input<Q, B> = {
  query: Q extends Schema ? z.output<Q> : undefined;
  body: B extends Schema ? z.output<B> : undefined;
};

/** zod issues as the per-field details of a VALIDATION_ERROR. */
export function validationError(where: "body" | "query" | "path", issues: z.core.$ZodIssue[]) {
  return new ApiError(
    "VALIDATION_ERROR",
    `invalid ${where}: ` + issues.map((i) => `${i.path.join(".") || where} ${i.message}`).join("; "),
    issues.map((i) => ({ field: i.path.join("."), message: i.message })),
  );
}

async function readJson(c: Context<AppEnv>): Promise<unknown> {
  const type = c.req.header("content-type") ?? "";
  const text = await c.req.text();
  if (text.length === 0) return undefined;
  if (!/^application\/([a-z.+-]*\+)?json\b/i.test(type) && type !== "") throw new ApiError("UNSUPPORTED_MEDIA_TYPE");
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError("INVALID_JSON", "the body is not valid JSON");
  }
}

/**
 * Registers a route on the app and describes it in the OpenAPI document from the
 * same schemas that validate it, so the document cannot drift from the code.
 */
type Middleware = (c: Context<AppEnv>, next: () => Promise<void>) => Promise<Response | void>;

/**
 * `databaseGate` goes in front of every route that needs the database, so none
 * waits on one that is down; the document lists its 503 for each of them.
 */
export function createApiRouter(app: Hono<AppEnv>, registry: OpenApiRegistry, authMiddleware: Middleware, databaseGate: Middleware) {
  function add<Q extends Schema | undefined, B extends Schema | undefined>(
    method: Method,
    path: string,
    spec: RouteSpec<Q, B>,
    handler: (c: Context<AppEnv>, input: Input<Q, B>) => Promise<Response>,
  ) {
    registry.add(method, path, spec);
    const run = async (c: Context<AppEnv>) => {
      let query: unknown;
      let body: unknown;
      if (spec.query) {
        const r = spec.query.safeParse(c.req.query());
        if (!r.success) throw validationError("query", r.error.issues);
        query = r.data;
      }
      if (spec.body) {
        const raw = await readJson(c);
        const r = spec.body.safeParse(raw ?? {});
        if (!r.success) throw validationError("body", r.error.issues);
        body = r.data;
      }
      return handler(c, { query, body } as Input<Q, B>);
    };
    const gate: Middleware = spec.database === false ? (_c, next) => next() : databaseGate;
    if (spec.auth) app.on(method.toUpperCase(), path, gate, authMiddleware, run);
    else app.on(method.toUpperCase(), path, gate, run);
  }
  return {
    get: <Q extends Schema | undefined, B extends Schema | undefined>(p: string, s: RouteSpec<Q, B>, h: (c: Context<AppEnv>, i: Input<Q, B>) => Promise<Response>) => add("get", p, s, h),
    post: <Q extends Schema | undefined, B extends Schema | undefined>(p: string, s: RouteSpec<Q, B>, h: (c: Context<AppEnv>, i: Input<Q, B>) => Promise<Response>) => add("post", p, s, h),
    delete: <Q extends Schema | undefined, B extends Schema | undefined>(p: string, s: RouteSpec<Q, B>, h: (c: Context<AppEnv>, i: Input<Q, B>) => Promise<Response>) => add("delete", p, s, h),
  };
}
export type ApiRouter = ReturnType<typeof createApiRouter>;

/** Ids and slugs in paths: short, and text a database can hold. */
const PathParam = text().max(128);

/** A path parameter the route's pattern guarantees; one no database could hold is a 400 naming it, never a 500. */
export function param(c: Context<AppEnv>, name: string): string {
  const value = c.req.param(name) ?? "";
  const r = PathParam.safeParse(value);
  if (!r.success) throw validationError("path", r.error.issues.map((issue) => ({ ...issue, path: [name] })));
  return value;
}
