import SwaggerParser from "@apidevtools/swagger-parser";
import { sqliteDatabase } from "@cm/testkit";
import { createConfig, lintFromString } from "@redocly/openapi-core";
import { Document, Spectral } from "@stoplight/spectral-core";
import { Json } from "@stoplight/spectral-parsers";
import { oas } from "@stoplight/spectral-rulesets";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";
import {
  deref,
  documentedCodes,
  fetchDocument,
  isProtected,
  jsonBodySchema,
  type OpenApiDocument,
  type Operation,
  operationsOf,
  type Schema,
  successStatus,
  typesOf,
} from "./support/document";

/*
 * The published document checked by tools nobody here wrote, as an integrator
 * would before generating a client, and compared field by field with
 * ../shared/spec/service-interface.md, whose 20 operations are written out here
 * by hand from the spec rather than read from the server.
 */

const REGIONS = ["us-east", "us-west", "eu-west", "eu-central", "asia-east", "asia-south"];
const CATEGORIES = ["llm", "image", "notebook", "utility", "custom"];
const NODE_STATUSES = ["online", "offline", "maintenance"];
const TRANSACTION_TYPES = ["deposit", "usage", "refund"];
const DEPLOYMENT_STATUSES = ["pending", "starting", "running", "stopping"];

/** Fields of the spec's resources (section 2), each with the JSON type it must have. */
const USER = { id: "string", walletAddress: "string", isOperator: "boolean", createdAt: "string" };
const TOKENS = { accessToken: "string", refreshToken: "string", expiresAt: "integer" };
const ENDPOINT = { type: "string", url: "string", internalPort: "integer" };
const DEPLOYMENT = {
  id: "string",
  userId: "string",
  nodeId: "string",
  templateId: "string",
  name: "string",
  status: "string",
  endpoints: "array",
  env: "object",
  totalCost: "number",
  createdAt: "string",
  startedAt: "string",
};
const LOG_ENTRY = { timestamp: "string", stream: "string", message: "string" };
const BALANCE = { available: "number", reserved: "number", totalUsed: "number" };
const PACKAGE = { id: "string", name: "string", credits: "number", priceUsd: "number", priceStable: "number", bonusPercent: "number" };
const DEPOSIT = {
  depositId: "string",
  amountStable: "number",
  creditsToReceive: "number",
  treasuryWallet: "string",
  stableMint: "string",
  expiresAt: "string",
};
const TRANSACTION = {
  id: "string",
  type: "string",
  amount: "number",
  description: "string",
  txSignature: "string",
  deploymentId: "string",
  createdAt: "string",
};
const SPECS = { cpuModel: "string", cpuCores: "integer", cpuThreads: "integer", ramMb: "integer", diskGb: "integer", diskType: "string" };
const SPECS_DETAIL = { ...SPECS, networkSpeedMbps: "integer", os: "string", containerVersion: "string" };
const GPU = { name: "string", vramMb: "integer", computeVersion: "string" };
const GPU_DETAIL = { ...GPU, brand: "string", computeCores: "integer", tensorCores: "integer", driverVersion: "string" };
const NODE_SUMMARY = {
  id: "string",
  name: "string",
  status: "string",
  specs: "object",
  gpus: "array",
  region: "string",
  country: "string",
  hourlyRateCents: "number",
  activeDeployments: "integer",
  maxDeployments: "integer",
  uptimePercent: "number",
};
const NODE_DETAIL = { ...NODE_SUMMARY, operatorId: "string", lastHeartbeat: "string" };
const TEMPLATE_SUMMARY = {
  id: "string",
  slug: "string",
  name: "string",
  description: "string",
  category: "string",
  requiresGpu: "boolean",
  minGpuVram: "integer",
};
const TEMPLATE_DETAIL = {
  ...TEMPLATE_SUMMARY,
  containerImage: "string",
  defaultEnv: "object",
  ports: "array",
  minCpuCores: "integer",
  minRamMb: "integer",
  minDiskGb: "integer",
  estimatedPullTime: "integer",
};
const PORT = { internal: "integer", protocol: "string", description: "string" };
const PAGINATION = { page: "integer", limit: "integer", total: "integer", totalPages: "integer" };

type Fields = Record<string, string>;
type SpecOperation = {
  method: string;
  path: string;
  auth: boolean;
  query?: Fields;
  body?: { fields: Fields; required: string[] };
  response: Fields;
};

/** Section 4 of the spec, one row per operation. */
const SPEC_OPERATIONS: SpecOperation[] = [
  {
    method: "post",
    path: "/auth/nonce",
    auth: false,
    body: { fields: { walletAddress: "string" }, required: ["walletAddress"] },
    response: { nonce: "string", message: "string", expiresAt: "integer" },
  },
  {
    method: "post",
    path: "/auth/verify",
    auth: false,
    body: { fields: { walletAddress: "string", signature: "string", message: "string" }, required: ["walletAddress", "signature", "message"] },
    response: { user: "object", ...TOKENS },
  },
  { method: "post", path: "/auth/refresh", auth: false, body: { fields: { refreshToken: "string" }, required: ["refreshToken"] }, response: TOKENS },
  { method: "get", path: "/auth/me", auth: true, response: { user: "object" } },
  {
    method: "post",
    path: "/deployments",
    auth: true,
    // The spec requires nodeId; a body with it is taken as the spec says, and one without it is placed on the cheapest node that fits (issue 30).
    body: { fields: { nodeId: "string", templateId: "string", customImage: "string", name: "string", env: "object" }, required: [] },
    response: { deployment: "object", estimatedHourlyCost: "number" },
  },
  {
    method: "get",
    path: "/deployments",
    auth: true,
    query: { status: "string", page: "integer", limit: "integer" },
    response: { deployments: "array", pagination: "object" },
  },
  { method: "get", path: "/deployments/{id}", auth: true, response: { deployment: "object" } },
  { method: "post", path: "/deployments/{id}/start", auth: true, response: { deployment: "object" } },
  { method: "post", path: "/deployments/{id}/stop", auth: true, response: { deployment: "object" } },
  { method: "delete", path: "/deployments/{id}", auth: true, response: { success: "boolean", message: "string" } },
  { method: "get", path: "/deployments/{id}/logs", auth: true, query: { tail: "integer", since: "string" }, response: { logs: "array" } },
  { method: "get", path: "/credits/balance", auth: true, response: { balance: "object" } },
  { method: "get", path: "/credits/packages", auth: true, response: { packages: "array" } },
  {
    method: "post",
    path: "/credits/deposit/initiate",
    auth: true,
    body: { fields: { packageId: "string", walletAddress: "string" }, required: ["packageId", "walletAddress"] },
    response: { deposit: "object" },
  },
  {
    method: "post",
    path: "/credits/deposit/confirm",
    auth: true,
    body: { fields: { depositId: "string", txSignature: "string" }, required: ["depositId", "txSignature"] },
    response: { transaction: "object", newBalance: "object" },
  },
  {
    method: "get",
    path: "/credits/transactions",
    auth: true,
    query: { type: "string", page: "integer", limit: "integer" },
    response: { transactions: "array", pagination: "object" },
  },
  {
    method: "get",
    path: "/nodes",
    auth: false,
    query: {
      status: "string",
      hasGpu: "boolean",
      minGpuVram: "number",
      minCpuCores: "number",
      minRamMb: "number",
      region: "string",
      maxHourlyRate: "number",
      page: "integer",
      limit: "integer",
    },
    response: { nodes: "array", pagination: "object" },
  },
  { method: "get", path: "/nodes/{id}", auth: false, response: { node: "object" } },
  { method: "get", path: "/templates", auth: false, query: { category: "string", requiresGpu: "boolean", search: "string" }, response: { templates: "array" } },
  { method: "get", path: "/templates/{idOrSlug}", auth: false, response: { template: "object" } },
];

describe("the published OpenAPI document, by independent validators", () => {
  let h: Harness;
  let doc: OpenApiDocument;
  let text: string;
  beforeAll(async () => {
    h = await startHarness(sqliteDatabase);
    ({ doc, text } = await fetchDocument(h.url));
  });
  afterAll(() => h.close());

  it("is valid for swagger-parser, which dereferences every $ref", async () => {
    const api = (await SwaggerParser.validate(structuredClone(doc) as never)) as { openapi?: string };
    expect(api.openapi).toMatch(/^3\.1\./);
  });

  it("has no error under Redocly's recommended rules", async () => {
    const config = await createConfig({ extends: ["recommended"] });
    const problems = await lintFromString({ source: text, absoluteRef: "/openapi.json", config });
    const errors = problems.filter((p) => p.severity === "error").map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`);
    expect(errors).toEqual([]);
  });

  it("has no error under Spectral's OAS rules", async () => {
    const spectral = new Spectral();
    spectral.setRuleset(oas as never);
    const results = await spectral.run(new Document(text, Json, "/openapi.json"));
    // DiagnosticSeverity.Error is 0.
    const errors = results.filter((r) => r.severity === 0).map((r) => `${r.code}: ${r.message} at ${r.path.join(".")}`);
    expect(errors).toEqual([]);
  });

  it("names every operation as a method, tags it with a declared tag, and describes the API and where it is served", () => {
    const problems: string[] = [];
    if (!doc.info.title || !doc.info.version || !doc.info.description) problems.push("info: title, version and description wanted");
    if (!doc.servers?.length) problems.push("servers: none");
    const declaredTags = new Set((doc.tags ?? []).map((t) => t.name));
    const ids = new Set<string>();
    for (const { method, path, op } of operationsOf(doc)) {
      const where = `${method.toUpperCase()} ${path}`;
      if (!/^[a-z][A-Za-z0-9]*$/.test(op.operationId ?? "")) problems.push(`${where}: operationId ${op.operationId} is not a method name`);
      else if (ids.has(op.operationId!)) problems.push(`${where}: operationId ${op.operationId} used twice`);
      ids.add(op.operationId ?? "");
      if (!op.tags?.length) problems.push(`${where}: no tag`);
      for (const tag of op.tags ?? []) if (!declaredTags.has(tag)) problems.push(`${where}: tag ${tag} not declared`);
      // Public operations say so with security: [] rather than leaving it unsaid.
      if (!Array.isArray(op.security ?? doc.security)) problems.push(`${where}: security unsaid`);
    }
    expect(problems).toEqual([]);
  });

  it("has all 20 operations of the spec with their exact paths, methods, fields and security", () => {
    const problems: string[] = [];
    for (const want of SPEC_OPERATIONS) {
      const where = `${want.method.toUpperCase()} ${want.path}`;
      const op = doc.paths[want.path]?.[want.method];
      if (!op) {
        problems.push(`${where}: missing`);
        continue;
      }
      if (isProtected(doc, op) !== want.auth) problems.push(`${where}: protected is ${isProtected(doc, op)}, the spec says ${want.auth}`);
      if (want.auth) {
        expect(op.security ?? doc.security, where).toContainEqual({ bearer: [] });
        expect(Object.keys(op.responses), `${where} documents 401`).toContain("401");
      }
      const pathParams = [...want.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      expect(
        (op.parameters ?? [])
          .filter((p) => p.in === "path")
          .map((p) => p.name)
          .sort(),
        `${where} path parameters`,
      ).toEqual(pathParams.sort());
      for (const p of op.parameters ?? []) if (p.in === "path") expect(p.required, `${where} ${p.name} required`).toBe(true);
      const query = Object.fromEntries((op.parameters ?? []).filter((p) => p.in === "query").map((p) => [p.name, deref(doc, p.schema)]));
      for (const [name, type] of Object.entries(want.query ?? {})) {
        if (!query[name]) problems.push(`${where}: query ${name} missing`);
        else if (!typeMatches(typesOf(query[name]!), type))
          problems.push(`${where}: query ${name} is ${JSON.stringify(query[name]!.type)}, the spec says ${type}`);
      }
      if (want.body) {
        const body = deref(doc, jsonBodySchema(op));
        expect(op.requestBody?.required, `${where} body required`).toBe(true);
        problems.push(...fieldProblems(doc, `${where} body`, body, want.body.fields));
        expect([...(body.required ?? [])].sort(), `${where} required body fields`).toEqual([...want.body.required].sort());
      } else {
        expect(op.requestBody, `${where} takes no body`).toBeUndefined();
      }
      const status = successStatus(op);
      const response = deref(doc, op.responses[status]!.content?.["application/json"]?.schema);
      problems.push(...fieldProblems(doc, `${where} ${status}`, response, want.response));
    }
    expect(problems).toEqual([]);
  });

  it("gives the spec's resources their exact fields, types and enums", () => {
    const r = (path: string, method: string, ...fields: string[]) => resolvePath(doc, responseSchema(doc, doc.paths[path]![method]!), fields);
    const problems = [
      ...fieldProblems(doc, "User", r("/auth/me", "get", "user"), USER),
      ...fieldProblems(doc, "Deployment", r("/deployments/{id}", "get", "deployment"), DEPLOYMENT),
      ...fieldProblems(doc, "Endpoint", r("/deployments/{id}", "get", "deployment", "endpoints", "[]"), ENDPOINT),
      ...fieldProblems(doc, "LogEntry", r("/deployments/{id}/logs", "get", "logs", "[]"), LOG_ENTRY),
      ...fieldProblems(doc, "Balance", r("/credits/balance", "get", "balance"), BALANCE),
      ...fieldProblems(doc, "Package", r("/credits/packages", "get", "packages", "[]"), PACKAGE),
      ...fieldProblems(doc, "Deposit", r("/credits/deposit/initiate", "post", "deposit"), DEPOSIT),
      ...fieldProblems(doc, "Transaction", r("/credits/transactions", "get", "transactions", "[]"), TRANSACTION),
      ...fieldProblems(doc, "Node summary", r("/nodes", "get", "nodes", "[]"), NODE_SUMMARY),
      ...fieldProblems(doc, "Node summary specs", r("/nodes", "get", "nodes", "[]", "specs"), SPECS),
      ...fieldProblems(doc, "Node summary Gpu", r("/nodes", "get", "nodes", "[]", "gpus", "[]"), GPU),
      ...fieldProblems(doc, "Node detail", r("/nodes/{id}", "get", "node"), NODE_DETAIL),
      ...fieldProblems(doc, "Node detail specs", r("/nodes/{id}", "get", "node", "specs"), SPECS_DETAIL),
      ...fieldProblems(doc, "Node detail Gpu", r("/nodes/{id}", "get", "node", "gpus", "[]"), GPU_DETAIL),
      ...fieldProblems(doc, "Template summary", r("/templates", "get", "templates", "[]"), TEMPLATE_SUMMARY),
      ...fieldProblems(doc, "Template detail", r("/templates/{idOrSlug}", "get", "template"), TEMPLATE_DETAIL),
      ...fieldProblems(doc, "Template port", r("/templates/{idOrSlug}", "get", "template", "ports", "[]"), PORT),
      ...fieldProblems(doc, "Pagination", r("/deployments", "get", "pagination"), PAGINATION),
      ...fieldProblems(doc, "Pagination", r("/nodes", "get", "pagination"), PAGINATION),
      ...fieldProblems(doc, "Pagination", r("/credits/transactions", "get", "pagination"), PAGINATION),
    ];
    expect(problems).toEqual([]);

    const enumOf = (s: Schema) => deref(doc, s).enum ?? [];
    expect(enumOf(r("/nodes", "get", "nodes", "[]", "region"))).toEqual(expect.arrayContaining(REGIONS));
    expect(enumOf(r("/nodes", "get", "nodes", "[]", "region"))).toHaveLength(REGIONS.length);
    expect(enumOf(r("/nodes", "get", "nodes", "[]", "status"))).toEqual(NODE_STATUSES);
    expect(enumOf(r("/nodes/{id}", "get", "node", "status"))).toEqual(NODE_STATUSES);
    expect(enumOf(r("/templates", "get", "templates", "[]", "category"))).toEqual(CATEGORIES);
    expect(enumOf(r("/credits/transactions", "get", "transactions", "[]", "type"))).toEqual(TRANSACTION_TYPES);
    expect(enumOf(r("/deployments/{id}", "get", "deployment", "status"))).toEqual(expect.arrayContaining(DEPLOYMENT_STATUSES));
    expect(enumOf(r("/deployments/{id}", "get", "deployment", "endpoints", "[]", "type"))).toContain("https");
    expect(enumOf(r("/deployments/{id}/logs", "get", "logs", "[]", "stream"))).toContain("stdout");

    const q = (path: string, name: string) => deref(doc, doc.paths[path]!.get!.parameters!.find((p) => p.name === name)!.schema);
    expect(q("/nodes", "status").enum).toEqual(NODE_STATUSES);
    expect(q("/nodes", "region").enum).toEqual(REGIONS);
    expect(q("/templates", "category").enum).toEqual(CATEGORIES);
    expect(q("/credits/transactions", "type").enum).toEqual(TRANSACTION_TYPES);
    // Section 8: page default 1, limit default 20; GET /deployments at most 100.
    for (const path of ["/deployments", "/nodes", "/credits/transactions"]) {
      expect(q(path, "page").default, `${path} page default`).toBe(1);
      expect(q(path, "limit").default, `${path} limit default`).toBe(20);
    }
    expect(q("/deployments/{id}/logs", "tail").default).toBe(100);
  });

  it("puts every bound the server enforces into the schema rather than prose", () => {
    const q = (path: string, name: string) => deref(doc, doc.paths[path]!.get!.parameters!.find((p) => p.name === name)!.schema);
    // The spec's maximum of 100 for GET /deployments, and the 100 the server applies to the others.
    for (const path of ["/deployments", "/nodes", "/credits/transactions"]) expect(q(path, "limit").maximum, `${path} limit maximum`).toBe(100);
    const env = deref(doc, deref(doc, jsonBodySchema(doc.paths["/deployments"]!.post!)).properties!.env);
    expect(env.maxProperties, "env maxProperties").toBe(100);
    // Numbers that reach an integer column are bounded to it.
    for (const name of ["minGpuVram", "minCpuCores", "minRamMb", "maxHourlyRate"]) expect(q("/nodes", name).maximum, name).toBeLessThanOrEqual(2 ** 31 - 1);
  });

  it("documents every error status an operation answers, with its codes", () => {
    const problems: string[] = [];
    for (const { method, path, op } of operationsOf(doc)) {
      const where = `${method.toUpperCase()} ${path}`;
      const statuses = Object.keys(op.responses);
      const need = (status: string, code?: string) => {
        if (!statuses.includes(status)) problems.push(`${where}: ${status} undocumented`);
        else if (code && !documentedCodes(op.responses[status]).includes(code)) problems.push(`${where}: ${status} does not name ${code}`);
      };
      for (const [status, response] of Object.entries(op.responses)) {
        if (!/^[45]/.test(status)) continue;
        if (deref(doc, response.content?.["application/json"]?.schema).properties?.error === undefined)
          problems.push(`${where}: ${status} is not the Error shape`);
        if (documentedCodes(response).length === 0) problems.push(`${where}: ${status} names no error code`);
      }
      const takesInput = op.requestBody !== undefined || (op.parameters ?? []).some((p) => p.in === "query" || p.in === "path");
      if (takesInput) need("400", "VALIDATION_ERROR");
      if (op.requestBody) {
        need("400", "INVALID_JSON");
        need("413", "PAYLOAD_TOO_LARGE");
        need("415", "UNSUPPORTED_MEDIA_TYPE");
      }
      if (isProtected(doc, op)) need("401", "UNAUTHORIZED");
      if ((op.parameters ?? []).some((p) => p.in === "path")) need("404");
      if (path !== "/health") need("503", "SERVICE_UNAVAILABLE");
    }
    for (const path of ["/auth/nonce", "/auth/verify", "/auth/refresh"]) {
      const op = doc.paths[path]!.post!;
      if (!documentedCodes(op.responses["429"]).includes("RATE_LIMITED")) problems.push(`POST ${path}: 429 RATE_LIMITED undocumented`);
      if (!op.responses["429"]?.headers?.["Retry-After"]) problems.push(`POST ${path}: 429 has no Retry-After header`);
    }
    expect(documentedCodes(doc.paths["/auth/verify"]!.post!.responses["401"])).toContain("INVALID_SIGNATURE");
    expect(documentedCodes(doc.paths["/auth/refresh"]!.post!.responses["401"])).toContain("INVALID_REFRESH_TOKEN");
    expect(documentedCodes(doc.paths["/auth/me"]!.get!.responses["401"])).toContain("TOKEN_EXPIRED");
    expect(documentedCodes(doc.paths["/auth/nonce"]!.post!.responses["400"])).toContain("INVALID_WALLET_ADDRESS");
    expect(problems).toEqual([]);
  });
});

function typeMatches(types: string[], want: string): boolean {
  // The spec's "number" for a count or a filter on an integer column is met by an integer.
  return types.includes(want) || (want === "number" && types.includes("integer"));
}

function fieldProblems(doc: OpenApiDocument, where: string, schema: Schema, fields: Fields): string[] {
  const props = schema.properties ?? {};
  const problems: string[] = [];
  for (const [name, type] of Object.entries(fields)) {
    const prop = props[name];
    if (!prop) {
      problems.push(`${where}: field ${name} missing`);
      continue;
    }
    const types = typesOf(deref(doc, prop));
    if (!typeMatches(types, type)) problems.push(`${where}: ${name} is ${JSON.stringify(types)}, the spec says ${type}`);
  }
  return problems;
}

function responseSchema(doc: OpenApiDocument, op: Operation): Schema {
  return deref(doc, op.responses[successStatus(op)]!.content?.["application/json"]?.schema);
}

/** Walks properties by name, `[]` stepping into an array's items. */
function resolvePath(doc: OpenApiDocument, schema: Schema, steps: string[]): Schema {
  let s = deref(doc, schema);
  for (const step of steps) s = deref(doc, step === "[]" ? s.items : s.properties?.[step]);
  return s;
}
