import type { paths } from "./openapi";
import type { Transport } from "./transport";

/*
 * A call's path, parameters, body and answer as the API's document says them
 * (openapi.ts, generated from /openapi.json): a path or method the API does not have,
 * a parameter it does not take, or an answer whose shape differs from the type a
 * method promises fails the typecheck.
 */

export type Method = "get" | "post" | "put" | "patch" | "delete";

/** The document's paths that answer `M`. */
export type Route<M extends Method> = {
  [P in keyof paths]: [NonNullable<paths[P][M]>] extends [never] ? never : P;
}[keyof paths];

type Operation<M extends Method, P extends Route<M>> = NonNullable<paths[P][M]>;
type Parameters<M extends Method, P extends Route<M>> = Operation<M, P> extends { parameters: infer X } ? X : never;
type Field<T, K extends string> = T extends { [key in K]?: infer X } ? X : never;

/** The path's `{name}` parameters, by name. */
export type PathParams<M extends Method, P extends Route<M>> = Field<Parameters<M, P>, "path">;
export type QueryOf<M extends Method, P extends Route<M>> = Field<Parameters<M, P>, "query">;
export type BodyOf<M extends Method, P extends Route<M>> = Operation<M, P> extends { requestBody?: { content: { "application/json": infer B } } } ? B : never;
/** The JSON of the route's 200 or 201. */
export type Answer<M extends Method, P extends Route<M>> =
  Operation<M, P> extends { responses: { 200: { content: { "application/json": infer A } } } }
    ? A
    : Operation<M, P> extends { responses: { 201: { content: { "application/json": infer A } } } }
      ? A
      : never;

type Present<K extends string, T> = [T] extends [never] ? { [key in K]?: never } : undefined extends T ? { [key in K]?: T } : { [key in K]: T };
export type CallOptions<M extends Method, P extends Route<M>> = Present<"params", PathParams<M, P>> &
  Present<"query", QueryOf<M, P>> &
  Present<"body", BodyOf<M, P>> & { auth?: boolean; signal?: AbortSignal };

/** A JSON call of the route, `{name}` in `path` filled from params (encoded). */
export function call<M extends Method, P extends Route<M>>(t: Transport, method: M, path: P, options: CallOptions<M, P>): Promise<Answer<M, P>> {
  const { params, query, body, auth, signal } = options as {
    params?: Record<string, string>;
    query?: object;
    body?: unknown;
    auth?: boolean;
    signal?: AbortSignal;
  };
  const url = (path as string).replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params?.[name];
    if (value === undefined) throw new TypeError(`${path} needs ${name}`);
    return encodeURIComponent(value);
  });
  return t.json<Answer<M, P>>(method.toUpperCase(), url, {
    auth,
    signal,
    body,
    query: query as Record<string, string | number | boolean | undefined> | undefined,
  });
}
