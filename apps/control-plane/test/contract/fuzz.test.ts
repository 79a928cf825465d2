import { describeEachDatabase } from "@cm/testkit";
import fc from "fast-check";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../support/fake-solana-rpc";
import { type Harness, newWallet, startHarness } from "../support/harness";
import {
  boundaryQueryValues,
  brokenObjectArbitrary,
  type Fixtures,
  NASTY_STRINGS,
  oddQueryValues,
  queryText,
  queryValueValid,
  valueArbitrary,
} from "./support/arbitraries";
import {
  type DocumentedOperation,
  deref,
  documentedCodes,
  fetchDocument,
  isProtected,
  jsonBodySchema,
  type OpenApiDocument,
  operationsOf,
  type Parameter,
  schemaValidator,
  typesOf,
  type Validator,
} from "./support/document";

/*
 * The document drives a fuzzer against a real server, on SQLite and on
 * PostgreSQL: for every operation it generates requests from the document's
 * schemas (valid ones, and valid ones with one thing broken), with and without
 * a token, and holds the answers to the document. Violations are collected per
 * operation, one example each, so a run names every disagreement at once.
 */

const SEED = 20261125;
const RUNS_PER_OPERATION = 40;
const AUTH_ATTEMPT = ["valid", "none", "garbage"] as const;

type Auth = (typeof AUTH_ATTEMPT)[number];
type FuzzRequest = {
  path: Record<string, string>;
  query: Array<[string, string]>;
  body?: { json: unknown } | { raw: string };
  contentType?: string;
  auth: Auth;
};
type Answer = { status: number; text: string; json: unknown; ms: number; contentType: string | null } | { error: string; ms: number };
type Violation = { rule: string; request: string; answer: string };

/**
 * The same seed sends the same requests to both databases, so their answers
 * (status and error code) are compared request by request: the first database
 * run records them, the next is held to them.
 */
const firstAnswers = new Map<string, { database: string; answers: string[] }>();

/** Figures for the report: requests sent, statuses seen, slowest answer. */
type Figures = { requests: number; valid: number; invalid: number; undecided: number; slowestMs: number; statuses: Map<number, number> };

describeEachDatabase("the server agrees with its OpenAPI document under fuzzing on $name", (db) => {
  let h: Harness;
  let rpc: FakeSolanaRpc;
  let doc: OpenApiDocument;
  let validate: Validator;
  let token: string;
  const fixtures: Fixtures = {};
  const pathFixtures: Record<string, string[]> = {};
  const started = Date.now();
  const figures: Figures = { requests: 0, valid: 0, invalid: 0, undecided: 0, slowestMs: 0, statuses: new Map() };
  const statusesByOperation: string[] = [];

  beforeAll(async () => {
    rpc = await startFakeSolanaRpc();
    h = await startHarness(db, {
      config: { TREASURY_WALLET: newWallet().address, SOLANA_RPC_URL: rpc.url, NODE_REGISTRATIONS_PER_HOUR: 100_000 },
    });
    ({ doc } = await fetchDocument(h.url));
    validate = schemaValidator(doc);

    // One account that operates nodes and rents them, with credits to spare.
    const me = await h.signIn();
    const spare = await h.signIn();
    token = me.token;
    await h.grantCredits(me.user.id, 1_000_000);
    const online = await h.onlineNode(token, {
      maxDeployments: 256,
      hourlyRateCents: 1,
      cpuCores: 64,
      ramMb: 512_000,
      gpus: [{ name: "NVIDIA H100 80GB HBM3", vramMb: 81559 }],
    });
    const offline = await h.call("POST", "/operator/nodes", {
      token,
      body: { name: "offline", region: "us-east", country: "US", hourlyRateCents: 5, maxDeployments: 2 },
    });
    const nodeIds = [online.id, offline.json.node.id as string];
    const templates = (await h.call("GET", "/templates")).json.templates as Array<{ id: string; slug: string }>;
    const deployments: string[] = [];
    for (const image of ["nginx:1.27", "redis:7"])
      deployments.push((await h.call("POST", "/deployments", { token, body: { nodeId: online.id, customImage: image } })).json.deployment.id);
    const packages = (await h.call("GET", "/credits/packages", { token })).json.packages as Array<{ id: string }>;
    const deposit = await h.call("POST", "/credits/deposit/initiate", { token, body: { packageId: packages[0]!.id, walletAddress: me.wallet.address } });

    Object.assign(fixtures, {
      nodeId: nodeIds,
      templateId: templates.map((t) => t.id),
      packageId: packages.map((p) => p.id),
      depositId: deposit.status === 200 ? [deposit.json.deposit.depositId] : [],
      walletAddress: [me.wallet.address],
      // Another session's: refreshing rotates it and ends its access token, which the fuzzer's own must outlive.
      refreshToken: [spare.refreshToken],
      customImage: ["nginx:1.27"],
    });
    Object.assign(pathFixtures, {
      "/nodes/{id}": nodeIds,
      "/operator/nodes/{id}": nodeIds,
      "/templates/{idOrSlug}": templates.flatMap((t) => [t.id, t.slug]),
      "/deployments/{id}": deployments,
    });
  });
  afterAll(async () => {
    await h?.close();
    await rpc?.close();
    console.log(
      `fuzz on ${db.name}: ${figures.requests} requests in ${((Date.now() - started) / 1000).toFixed(1)} s; ${figures.valid} valid, ${figures.invalid} invalid, ${figures.undecided} undecided by the document; slowest answer ${figures.slowestMs} ms; statuses ${JSON.stringify(Object.fromEntries([...figures.statuses].sort(([a], [b]) => a - b)))}\n  ${statusesByOperation.join("\n  ")}`,
    );
  });

  // Reads first, then writes, then removals, so fixtures live as long as possible.
  const order = (o: { method: string }) => ({ get: 0, post: 1, delete: 2 })[o.method] ?? 1;
  const planned = [
    "GET /health",
    "GET /ready",
    "POST /auth/nonce",
    "POST /auth/verify",
    "POST /auth/refresh",
    "GET /auth/me",
    "GET /nodes",
    "GET /nodes/{id}",
    "POST /operator/nodes",
    "GET /operator/nodes",
    "DELETE /operator/nodes/{id}",
    "GET /templates",
    "GET /templates/{idOrSlug}",
    "POST /deployments",
    "GET /deployments",
    "GET /deployments/{id}",
    "DELETE /deployments/{id}",
    "POST /deployments/{id}/start",
    "POST /deployments/{id}/stop",
    "GET /deployments/{id}/logs",
    "GET /credits/balance",
    "GET /credits/packages",
    "POST /credits/deposit/initiate",
    "POST /credits/deposit/confirm",
    "GET /credits/transactions",
  ]
    .map((s) => ({ method: s.split(" ")[0]!.toLowerCase(), path: s.split(" ")[1]! }))
    .sort((a, b) => order(a) - order(b));

  it("documents every operation the fuzzer plans to send", () => {
    const documented = operationsOf(doc).map((o) => `${o.method} ${o.path}`);
    expect(documented.sort()).toEqual(planned.map((o) => `${o.method} ${o.path}`).sort());
  });

  for (const { method, path } of planned) {
    it(`${method.toUpperCase()} ${path}: ${RUNS_PER_OPERATION} generated requests and one at each bound, answered as documented`, async () => {
      const op = doc.paths[path]?.[method];
      if (!op) throw new Error(`${method.toUpperCase()} ${path} is not in the document`);
      const target: DocumentedOperation = { method, path, op };
      const violations = new Map<string, Violation & { count: number }>();
      const answers: string[] = [];
      let previous: string[] = [];
      const first = firstAnswers.get(`${method} ${path}`);
      const note = (v: Violation) => {
        const seen = violations.get(v.rule);
        if (seen) seen.count++;
        else violations.set(v.rule, { ...v, count: 1 });
      };
      const pathIds = pathFixtures[path.replace(/\/(start|stop|logs)$/, "")] ?? [];
      const arbitrary = requestArbitrary(doc, target, fixtures, pathIds);
      const examples = boundaryExamples(doc, target, fixtures, pathIds).map((req) => [req] as [FuzzRequest]);
      await fc.assert(
        fc.asyncProperty(arbitrary, async (req) => {
          const { found, request, answer } = await exercise(h.url, doc, validate, target, req, token, figures);
          // A dropped connection may be the previous request's doing: say which it was.
          for (const v of found) note(v.rule.startsWith("no answer") ? { ...v, answer: `${v.answer}; the requests before: ${previous.join(" | ")}` } : v);
          previous = [...previous.slice(-2), `${request.slice(0, 160)} -> ${answer}`];
          const earlier = first?.answers[answers.length];
          if (earlier !== undefined && earlier !== answer)
            note({ rule: `${first!.database} and ${db.name} answer differently`, request, answer: `${first!.database}: ${earlier}; ${db.name}: ${answer}` });
          answers.push(answer);
        }),
        { seed: SEED, numRuns: RUNS_PER_OPERATION + examples.length, endOnFailure: true, examples },
      );
      if (!first) firstAnswers.set(`${method} ${path}`, { database: db.name, answers });
      statusesByOperation.push(`${method.toUpperCase()} ${path} ${[...new Set(answers)].sort().join(",")}`);
      const found = [...violations.values()].map((v) => `${v.rule} (${v.count}x), e.g. ${v.request} -> ${v.answer}`);
      if (found.length) throw new Error(`${method.toUpperCase()} ${path} disagrees with the document:\n${found.join("\n")}`);
    });
  }
});

function requestArbitrary(doc: OpenApiDocument, { op, method }: DocumentedOperation, fixtures: Fixtures, pathIds: string[]): fc.Arbitrary<FuzzRequest> {
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
function boundaryExamples(doc: OpenApiDocument, { op }: DocumentedOperation, fixtures: Fixtures, pathIds: string[]): FuzzRequest[] {
  const params = op.parameters ?? [];
  const path = Object.fromEntries(params.filter((p) => p.in === "path").map((p) => [p.name, pathIds[0] ?? "x"]));
  const bodySchema = jsonBodySchema(op);
  const body = bodySchema ? (fc.sample(valueArbitrary(doc, bodySchema, fixtures), { seed: SEED, numRuns: 1 })[0] as Record<string, unknown>) : undefined;
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
function validity(doc: OpenApiDocument, validate: Validator, { op }: DocumentedOperation, req: FuzzRequest): boolean | undefined {
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

function urlOf(baseUrl: string, { path }: DocumentedOperation, req: FuzzRequest): string {
  const p = path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(req.path[name]!));
  const q = req.query.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join("&");
  return `${baseUrl}${p}${q ? `?${q}` : ""}`;
}

async function send(url: string, method: string, req: FuzzRequest, token: string): Promise<Answer> {
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

/** Sends one request and returns every way its answer disagrees with the document. */
async function exercise(
  baseUrl: string,
  doc: OpenApiDocument,
  validate: Validator,
  target: DocumentedOperation,
  req: FuzzRequest,
  token: string,
  figures: Figures,
): Promise<{ found: Violation[]; request: string; answer: string }> {
  const { op, method } = target;
  const url = urlOf(baseUrl, target, req);
  const answer = await send(url, method, req, token);
  const valid = validity(doc, validate, target, req);
  figures.requests++;
  figures.slowestMs = Math.max(figures.slowestMs, answer.ms);
  if (valid === true) figures.valid++;
  else if (valid === false) figures.invalid++;
  else figures.undecided++;

  const request = describeRequest(method, url, req, valid);
  const out: Violation[] = [];
  if ("error" in answer) return { found: [{ rule: "no answer (connection failed)", request, answer: answer.error }], request, answer: "no answer" };
  const { status, json, text } = answer;
  figures.statuses.set(status, (figures.statuses.get(status) ?? 0) + 1);
  const said = `${status} ${text.slice(0, 240)}`;
  const fail = (rule: string) => out.push({ rule, request, answer: said });

  const documented = op.responses[String(status)] ?? op.responses[`${String(status)[0]}XX`] ?? op.responses.default;
  const code = (json as { error?: { code?: unknown } } | undefined)?.error?.code;
  if (!documented) fail(`status ${status}${typeof code === "string" ? ` ${code}` : ""} is not documented`);
  if (status >= 500 && !(documented && typeof code === "string" && documentedCodes(documented).includes(code)))
    fail(`a 5xx that is not documented: ${status} ${String(code)}`);

  const schema = documented?.content?.["application/json"]?.schema;
  if (schema) {
    if (json === undefined) fail(`${status} has no JSON body`);
    else {
      const errors = validate(schema, json);
      if (errors.length) fail(`${status} body does not match its schema: ${errors.slice(0, 2).join("; ")}`);
    }
    if (!answer.contentType?.startsWith("application/json")) fail(`${status} content-type is ${answer.contentType}`);
  }
  if (status >= 400) {
    if (validate(doc.components.schemas.Error!, json).length > 0) fail(`${status} is not in the error shape`);
    else if (documented && documentedCodes(documented).length > 0 && !documentedCodes(documented).includes(code as string))
      fail(`${status} ${String(code)} is not a code documented for ${status}`);
    // The client must learn which field to fix (unless the body is not an object at all).
    const wholeBodyWrong =
      req.body !== undefined && "json" in req.body && (typeof req.body.json !== "object" || req.body.json === null || Array.isArray(req.body.json));
    if (code === "VALIDATION_ERROR" && !wholeBodyWrong && !namesAField(json)) fail(`400 VALIDATION_ERROR names no field${fieldsNamed(json)}`);
  }

  const authorized = !isProtected(doc, op) || req.auth === "valid";
  if (!authorized && status >= 200 && status < 300) fail("a protected operation answered 2xx without a valid token");
  if (!authorized && valid === true && status !== 401) fail(`a valid request without a valid token got ${status}, not 401`);
  if (valid === true && authorized) {
    if (status === 400 && (code === "VALIDATION_ERROR" || code === "INVALID_JSON"))
      fail(`a request the document calls valid was refused with 400 ${code}${fieldsNamed(json)}`);
    if (status === 415 || status === 414 || status === 431) fail(`a request the document calls valid was refused with ${status}`);
  }
  if (valid === false) {
    if (status >= 200 && status < 300) fail(`a request the document calls invalid was accepted with ${status}`);
    if (status >= 500) fail(`a request the document calls invalid got ${status} ${String(code)}, not a 4xx`);
  }
  return { found: out, request, answer: typeof code === "string" ? `${status} ${code}` : String(status) };
}

function namesAField(json: unknown): boolean {
  const details = (json as { error?: { details?: unknown } }).error?.details;
  return Array.isArray(details) && details.some((d: { field?: unknown }) => typeof d.field === "string" && d.field.length > 0);
}

/** The fields a validation error names, so each distinct refusal is reported once. */
function fieldsNamed(json: unknown): string {
  const details = (json as { error?: { details?: unknown } }).error?.details;
  if (!Array.isArray(details)) return "";
  const fields = details.map((d: { field?: unknown; message?: unknown }) => `${String(d.field)}: ${String(d.message).replace(/\d+/g, "N")}`);
  return ` on ${[...new Set(fields)].sort().join(", ")}`;
}

function describeRequest(method: string, url: string, req: FuzzRequest, valid: boolean | undefined): string {
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
