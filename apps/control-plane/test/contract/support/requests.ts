import fc from "fast-check";
import {
  boundaryQueryValues,
  brokenObjectArbitrary,
  type Fixtures,
  NASTY_STRINGS,
  oddQueryValues,
  queryText,
  queryValueValid,
  valueArbitrary,
} from "./arbitraries";
import { type DocumentedOperation, deref, isProtected, jsonBodySchema, type OpenApiDocument, type Parameter, typesOf, type Validator } from "./document";

/*
 * The fuzzer's requests: drawn from an operation's schemas, probed at their
 * bounds, judged valid or not by the document alone, and sent as a client
 * would send them.
 */

const AUTH_ATTEMPT = ["valid", "none", "garbage"] as const;

export type Auth = (typeof AUTH_ATTEMPT)[number];
export type FuzzRequest = {
  path: Record<string, string>;
  query: Array<[string, string]>;
  body?: { json: unknown } | { raw: string };
  contentType?: string;
  auth: Auth;
};
export type Answer = { status: number; text: string; json: unknown; ms: number; contentType: string | null } | { error: string; ms: number };

export function requestArbitrary(doc: OpenApiDocument, { op, method }: DocumentedOperation, fixtures: Fixtures, pathIds: string[]): fc.Arbitrary<FuzzRequest> {
  const params = op.parameters ?? [];
  const pathParams = params.filter((p) => p.in === "path");
  const queryParams = params.filter((p) => p.in === "query");

  const pathValue = (p: Parameter) =>
    fc
      .oneof(
        ...(pathIds.length ? [{ arbitrary: fc.constantFrom(...pathIds), weight: 4 }] : []),
        { arbitrary: valueArbitrary(doc, p.schema).map(String), weight: 2 },
        { arbitrary: fc.constantFrom(...NASTY_STRINGS, "x".repeat(129), "x".repeat(5000), "node_%zz", "a/b", "a?b", "a#b"), weight: 2 },
      )
      // Not this operation's URL once a client normalises it, or not encodable at all (lone surrogates).
      .filter((s) => s !== "" && s !== "." && s !== ".." && encodable(s));
  const path = fc.record(Object.fromEntries(pathParams.map((p) => [p.name, pathValue(p)])));

  const queryValue = (p: Parameter) => {
    const edges = boundaryQueryValues(doc, p.schema);
    return fc
      .oneof(
        { arbitrary: valueArbitrary(doc, p.schema).map(queryText), weight: 4 },
        { arbitrary: fc.constantFrom(...oddQueryValues(doc, p.schema)), weight: 2 },
        ...(edges.length ? [{ arbitrary: fc.constantFrom(...edges), weight: 2 }] : []),
      )
      .filter(encodable);
  };
  const query = fc
    .tuple(
      fc.tuple(
        ...queryParams.map((p) =>
          fc.option(
            queryValue(p).map((v) => [p.name, v] as [string, string]),
            { nil: undefined, freq: 2 },
          ),
        ),
      ),
      // Rarely: a key the document does not name, or a URL past 16 KiB.
      fc.oneof(
        { arbitrary: fc.constant([] as Array<[string, string]>), weight: 30 },
        { arbitrary: fc.constant([["unknownKey", "1"]] as Array<[string, string]>), weight: 1 },
        { arbitrary: fc.constant([["pad", "p".repeat(17_000)]] as Array<[string, string]>), weight: 1 },
      ),
    )
    .map(([known, extra]) => [...known.filter((q): q is [string, string] => q !== undefined), ...extra]);

  const bodySchema = jsonBodySchema(op);
  const body: fc.Arbitrary<Pick<FuzzRequest, "body" | "contentType">> = bodySchema
    ? fc.oneof(
        { arbitrary: valueArbitrary(doc, bodySchema, fixtures).map((json) => ({ body: { json }, contentType: "application/json" })), weight: 5 },
        { arbitrary: brokenObjectArbitrary(doc, bodySchema, fixtures).map((json) => ({ body: { json }, contentType: "application/json" })), weight: 4 },
        {
          arbitrary: fc.record({
            body: fc.constantFrom<FuzzRequest["body"]>({ raw: "" }, { raw: "{" }, { raw: "not json" }, { raw: '{"a":' }, { raw: "\u0000" }, undefined),
            contentType: fc.constantFrom<string | undefined>("application/json", undefined),
          }),
          weight: 1,
        },
        {
          arbitrary: valueArbitrary(doc, bodySchema, fixtures).chain((json) =>
            fc
              .constantFrom(undefined, "text/plain", "application/x-www-form-urlencoded", "application/json; charset=utf-8", "APPLICATION/JSON")
              .map((contentType) => ({ body: { json }, contentType })),
          ),
          weight: 1,
        },
      )
    : method === "get"
      ? fc.constant({})
      : fc.oneof(
          { arbitrary: fc.constant({}), weight: 9 },
          { arbitrary: fc.constant({ body: { raw: '{"unexpected":true}' }, contentType: "application/json" }), weight: 1 },
        );

  const auth = isProtected(doc, op)
    ? fc.oneof({ arbitrary: fc.constant<Auth>("valid"), weight: 4 }, { arbitrary: fc.constantFrom<Auth>("none", "garbage"), weight: 1 })
    : fc.oneof({ arbitrary: fc.constant<Auth>("none"), weight: 3 }, { arbitrary: fc.constantFrom<Auth>("valid", "garbage"), weight: 1 });

  return fc.record({ path, query, auth, extra: body }).map(({ extra, ...r }) => ({ ...r, ...extra }));
}

/**
 * Requests sent every run besides the random ones, so a bound is always probed
 * on both sides: each query parameter and each body field at its edges (and
 * with a NUL), each path parameter with a NUL, all with a valid token.
 */
export function boundaryExamples(doc: OpenApiDocument, { op }: DocumentedOperation, fixtures: Fixtures, pathIds: string[], seed: number): FuzzRequest[] {
  const params = op.parameters ?? [];
  const path = Object.fromEntries(params.filter((p) => p.in === "path").map((p) => [p.name, pathIds[0] ?? "x"]));
  const bodySchema = jsonBodySchema(op);
  const body = bodySchema ? (fc.sample(valueArbitrary(doc, bodySchema, fixtures), { seed, numRuns: 1 })[0] as Record<string, unknown>) : undefined;
  const base: FuzzRequest = { path, query: [], auth: "valid", ...(body ? { body: { json: body }, contentType: "application/json" } : {}) };
  const out: FuzzRequest[] = [];
  for (const p of params) {
    if (p.in === "path") out.push({ ...base, path: { ...path, [p.name]: "a\u0000b" } });
    if (p.in === "query") for (const v of [...boundaryQueryValues(doc, p.schema), "a\u0000b"]) out.push({ ...base, query: [[p.name, v]] });
  }
  const props = deref(doc, bodySchema).properties ?? {};
  if (body && typeof body === "object" && !Array.isArray(body)) {
    for (const [name, schemaIn] of Object.entries(props)) {
      const schema = deref(doc, schemaIn);
      const edges: unknown[] = [];
      if (schema.maximum !== undefined) edges.push(schema.maximum, schema.maximum + 1);
      if (schema.minimum !== undefined) edges.push(schema.minimum, schema.minimum - 1);
      if (schema.maxLength !== undefined) edges.push("s".repeat(schema.maxLength), "s".repeat(schema.maxLength + 1));
      if (typesOf(schema).includes("string")) edges.push("a\u0000b", "a\uD800b");
      if (schema.maxItems !== undefined) edges.push(Array.from({ length: schema.maxItems + 1 }, () => 80));
      if (schema.additionalProperties && typeof schema.additionalProperties === "object") {
        edges.push({ "bad key": "v" }, Object.fromEntries(Array.from({ length: (schema.maxProperties ?? 100) + 1 }, (_, i) => [`K${i}`, "v"])));
      }
      for (const edge of edges) out.push({ ...base, body: { json: { ...body, [name]: edge } } });
    }
    // A megabyte of text in the first string field: once just over the body limit, once just under it.
    const text = Object.entries(props).find(([, sc]) => typesOf(deref(doc, sc)).includes("string"))?.[0];
    if (text) for (const n of [1024 * 1024, 1024 * 1024 - 512]) out.push({ ...base, body: { json: { ...body, [text]: "a".repeat(n) } } });
  }
  return out;
}

function encodable(s: string): boolean {
  try {
    encodeURIComponent(s);
    return true;
  } catch {
    return false;
  }
}

/** Valid, invalid, or undefined where the document does not decide (an unknown query key). */
export function validity(doc: OpenApiDocument, validate: Validator, { op }: DocumentedOperation, req: FuzzRequest): boolean | undefined {
  const results: Array<boolean | undefined> = [];
  for (const p of op.parameters ?? []) {
    if (p.in === "path") results.push(validate(deref(doc, p.schema), req.path[p.name]).length === 0);
    if (p.in === "query") {
      const values = req.query.filter(([k]) => k === p.name);
      if (values.length === 0) results.push(!p.required);
      for (const [, v] of values) results.push(queryValueValid(validate, doc, p.schema, v));
    }
  }
  const named = new Set((op.parameters ?? []).filter((p) => p.in === "query").map((p) => p.name));
  if (req.query.some(([k]) => !named.has(k))) results.push(undefined);
  const schema = jsonBodySchema(op);
  if (schema) {
    const mediaType = (req.contentType ?? "").split(";")[0]!.trim().toLowerCase();
    if (req.body === undefined) results.push(!op.requestBody?.required);
    else if (mediaType !== "application/json") results.push(false);
    else {
      let value: unknown;
      let parsed = true;
      if ("json" in req.body) value = req.body.json;
      else {
        try {
          value = JSON.parse(req.body.raw);
        } catch {
          parsed = false;
        }
      }
      results.push(parsed && validate(schema, value).length === 0);
    }
  } else if (req.body !== undefined) {
    results.push(undefined);
  }
  if (results.includes(false)) return false;
  if (results.includes(undefined)) return undefined;
  return true;
}

export function urlOf(baseUrl: string, { path }: DocumentedOperation, req: FuzzRequest): string {
  const p = path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(req.path[name]!));
  const q = req.query.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join("&");
  return `${baseUrl}${p}${q ? `?${q}` : ""}`;
}

export async function send(url: string, method: string, req: FuzzRequest, token: string): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (req.auth === "valid") headers.authorization = `Bearer ${token}`;
  if (req.auth === "garbage") headers.authorization = "Bearer not-a-token";
  if (req.contentType) headers["content-type"] = req.contentType;
  const body = req.body === undefined ? undefined : "json" in req.body ? JSON.stringify(req.body.json) : req.body.raw;
  const t0 = performance.now();
  try {
    const res = await fetch(url, { method: method.toUpperCase(), headers, body, redirect: "manual" });
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, text, json, contentType: res.headers.get("content-type"), ms: Math.round(performance.now() - t0) };
  } catch (e) {
    return { error: String((e as Error).cause ?? e), ms: Math.round(performance.now() - t0) };
  }
}

export function describeRequest(method: string, url: string, req: FuzzRequest, valid: boolean | undefined): string {
  const u = new URL(url);
  const target = `${u.pathname}${u.search}`;
  const shown = target.length > 160 ? `${target.slice(0, 120)}…(${target.length} chars)` : target;
  let body = "";
  if (req.body !== undefined) {
    const text = "json" in req.body ? JSON.stringify(req.body.json) : JSON.stringify(req.body.raw);
    body = ` body=${text.length > 200 ? `${text.slice(0, 160)}…(${text.length} chars)` : text}`;
  }
  return `${method.toUpperCase()} ${shown} [${req.auth} token, ${req.contentType ?? "no content-type"}, ${valid === undefined ? "undecided" : valid ? "valid" : "invalid"}]${body}`;
}
