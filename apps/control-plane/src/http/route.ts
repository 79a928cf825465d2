import { ERROR_CODES, ErrorBody, type ErrorCode, text } from "@cm/protocol";
import { createRoute, OpenAPIHono, type RouteConfig } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import { z } from "zod";
import type { RouteScope } from "../services/auth-service";
import type { AppEnv } from "./env";
import { scopeOf } from "./scopes";
import { readJsonBody, validationHook } from "./validation";

/** Every response carries the request id (hono/request-id), listed once under components.headers. */
export const REQUEST_ID_HEADER = { "X-Request-Id": { $ref: "#/components/headers/RequestId" } };
export const REQUEST_ID_HEADER_COMPONENT = {
  description: "This request's id, also in every error body: yours when you sent a plain one (letters, digits, _ - =, at most 64), else ours",
  schema: { type: "string" as const },
};

/** A JSON response from a zod schema. */
export const json = <S extends z.ZodType>(schema: S, description: string) => ({
  description,
  headers: REQUEST_ID_HEADER,
  content: { "application/json": { schema } },
});

/** A required JSON request body from a zod schema. */
export const jsonBody = <S extends z.ZodType>(schema: S) => ({ required: true, content: { "application/json": { schema } } });

/** Ids and slugs in paths: short, and text a database can hold (a 400 naming the parameter, never a 500). */
export const PathParam = text().max(128);
export const IdParams = z.object({ id: PathParam.meta({ description: "the resource's id" }) });

/** The codes answered with a Retry-After header: waiting is the remedy. */
const RETRY_AFTER: readonly ErrorCode[] = ["RATE_LIMITED", "SERVICE_UNAVAILABLE", "CHAIN_UNAVAILABLE", "TX_NOT_FOUND", "TOO_MANY_OPEN_DEPOSITS"];

/**
 * Response entries for these error codes, grouped by status, each status
 * described by the codes it can carry (from ERROR_CODES), all in the one error shape.
 */
export function errors(...codes: ErrorCode[]) {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set(codes)) {
    const status = ERROR_CODES[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return Object.fromEntries(
    [...byStatus].map(([status, cs]) => {
      const response = json(ErrorBody, cs.map((c) => `\`${c}\`: ${ERROR_CODES[c].description}`).join("\n\n"));
      const waits = cs.filter((c) => RETRY_AFTER.includes(c));
      if (waits.length === 0) return [status, response];
      const retryAfter = { description: `seconds to wait before trying again (with ${waits.join(", ")})`, schema: { type: "integer" as const, minimum: 1 } };
      return [status, { ...response, headers: { ...response.headers, "Retry-After": retryAfter } }];
    }),
  );
}

export type RouteGuards = {
  /** Fails at once while the database is known to be down. */
  database: MiddlewareHandler<AppEnv>;
  /** Sets `user` from the bearer token or API key, or fails 401 (403 for a key without the scope). */
  user(scope: RouteScope): MiddlewareHandler<AppEnv>;
};

export type Access = {
  /** Needs a bearer token (or an API key with the scope ROUTE_SCOPES gives the route's operationId). */
  auth?: boolean;
  /** false for the few routes that never touch the database (liveness, readiness): no 503 gate in front. */
  database?: false;
  /** The route's own error codes; those of auth, validation and the database gate are added. */
  errors?: readonly ErrorCode[];
};

/**
 * Wraps createRoute so that security, the guards in front of a route and the
 * error responses they can cause are stated once, from `access`, not per route.
 */
export function createRouteFactory(guards: RouteGuards) {
  return function route<const R extends Omit<RouteConfig, "security" | "middleware">>(config: R, access: Access = {}): R & { getRoutingPath(): string } {
    const { request } = config;
    const scope = access.auth ? scopeOf(config.operationId) : undefined;
    const middleware: MiddlewareHandler<AppEnv>[] = [];
    if (access.database !== false) middleware.push(guards.database);
    if (scope) middleware.push(guards.user(scope));
    if (request?.body) middleware.push(readJsonBody);
    const codes: ErrorCode[] = [...(access.errors ?? [])];
    if (scope) codes.push("UNAUTHORIZED", "TOKEN_EXPIRED", "API_KEY_EXPIRED");
    if (scope && scope !== "any") codes.push("INSUFFICIENT_SCOPE");
    if (request?.body) codes.push("VALIDATION_ERROR", "INVALID_JSON", "UNSUPPORTED_MEDIA_TYPE", "PAYLOAD_TOO_LARGE");
    if (request?.query || request?.params) codes.push("VALIDATION_ERROR");
    if (access.database !== false) codes.push("SERVICE_UNAVAILABLE");
    // Node's parser refuses these for any route, before the app (http/client-error.ts).
    codes.push("URI_TOO_LONG", "HEADERS_TOO_LARGE");
    return createRoute({
      ...config,
      // The scope goes in x-scope rather than the requirement's array, which OpenAPI keeps for OAuth scopes: tools read `[]` as plain bearer auth.
      security: scope ? [{ bearer: [] }] : [],
      ...(scope ? { "x-scope": scope } : {}),
      middleware,
      responses: { ...config.responses, ...errors(...codes) },
    }) as unknown as R & { getRoutingPath(): string };
  };
}
export type RouteFactory = ReturnType<typeof createRouteFactory>;

/** A sub-app for one resource: validation failures answer in the one error shape. */
export const createRouter = () => new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
