import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

/**
 * The served OpenAPI document read as an integrator would read it: plain JSON,
 * with no help from the zod schemas it was generated from. Everything here is
 * written against OpenAPI 3.1 itself so the checks stay independent of the server.
 */
export type Schema = Record<string, unknown> & {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  enum?: unknown[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minItems?: number;
  maxItems?: number;
  maxProperties?: number;
  default?: unknown;
  nullable?: boolean;
};

export type Parameter = { name: string; in: "query" | "path" | "header" | "cookie"; required?: boolean; schema: Schema; description?: string };
export type Response = { description: string; content?: Record<string, { schema: Schema }>; headers?: Record<string, unknown> };
export type Operation = {
  operationId?: string;
  tags?: string[];
  summary?: string;
  description?: string;
  security?: Array<Record<string, string[]>>;
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content: Record<string, { schema: Schema }> };
  responses: Record<string, Response>;
};
export type OpenApiDocument = {
  openapi: string;
  info: { title?: string; version?: string; description?: string; license?: unknown; contact?: unknown };
  servers?: Array<{ url: string }>;
  tags?: Array<{ name: string; description?: string }>;
  security?: Array<Record<string, string[]>>;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema>; securitySchemes?: Record<string, unknown> };
};

export const HTTP_METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"] as const;

export type DocumentedOperation = { method: string; path: string; op: Operation };

export function operationsOf(doc: OpenApiDocument): DocumentedOperation[] {
  const out: DocumentedOperation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of HTTP_METHODS) {
      const op = item[method];
      if (op) out.push({ method, path, op });
    }
  }
  return out;
}

/** Follows local `$ref`s until a schema with content is reached. */
export function deref(doc: OpenApiDocument, schema: Schema | undefined): Schema {
  let s = schema ?? {};
  for (let hops = 0; s.$ref !== undefined; hops++) {
    if (hops > 32) throw new Error(`$ref loop at ${s.$ref}`);
    const ref = s.$ref;
    if (!ref.startsWith("#/")) throw new Error(`non-local $ref ${ref}`);
    let target: unknown = doc;
    for (const part of ref.slice(2).split("/")) target = (target as Record<string, unknown>)[part.replace(/~1/g, "/").replace(/~0/g, "~")];
    if (target === undefined) throw new Error(`dangling $ref ${ref}`);
    s = target as Schema;
  }
  return s;
}

/** The types a schema allows, `type: [..]` (3.1) and `nullable` (3.0) both read. */
export function typesOf(schema: Schema): string[] {
  const t = schema.type === undefined ? [] : Array.isArray(schema.type) ? schema.type : [schema.type];
  return schema.nullable ? [...t, "null"] : t;
}

export function jsonBodySchema(op: Operation): Schema | undefined {
  return op.requestBody?.content["application/json"]?.schema;
}

export function successStatus(op: Operation): string {
  const s = Object.keys(op.responses).find((k) => /^2\d\d$/.test(k));
  if (!s) throw new Error(`no 2xx response in ${op.operationId}`);
  return s;
}

/** The error codes a response names in its description, written as `CODE`. */
export function documentedCodes(response: Response | undefined): string[] {
  return [...(response?.description ?? "").matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!);
}

export function isProtected(doc: OpenApiDocument, op: Operation): boolean {
  const security = op.security ?? doc.security ?? [];
  return security.length > 0 && !security.some((req) => Object.keys(req).length === 0);
}

export async function fetchDocument(baseUrl: string): Promise<{ doc: OpenApiDocument; text: string }> {
  const res = await fetch(`${baseUrl}/openapi.json`);
  if (res.status !== 200) throw new Error(`/openapi.json answered ${res.status}`);
  const text = await res.text();
  return { doc: JSON.parse(text) as OpenApiDocument, text };
}

export type Validator = (schema: Schema, value: unknown) => string[];

/**
 * A JSON Schema 2020-12 validator (OpenAPI 3.1's dialect) over the document's
 * components: returns the errors, empty when the value is valid.
 */
export function schemaValidator(doc: OpenApiDocument): Validator {
  const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: true });
  addFormats(ajv);
  ajv.addSchema({ $id: "doc", components: doc.components }, "doc");
  const cache = new Map<Schema, ReturnType<typeof ajv.compile>>();
  return (schema, value) => {
    let validate = cache.get(schema);
    if (!validate) {
      validate = ajv.compile(rebase(schema));
      cache.set(schema, validate);
    }
    return validate(value) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message}`);
  };
}

/** Rewrites `#/components/...` refs to point into the registered document. */
function rebase(schema: Schema): Schema {
  return JSON.parse(JSON.stringify(schema).replace(/"\$ref":"#\//g, '"$ref":"doc#/')) as Schema;
}
