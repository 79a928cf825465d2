import { z } from "zod";
import { ERROR_CODES, ErrorBody, type ErrorCode } from "@cm/protocol";
import type { RouteSpec } from "./api-router";

type JsonSchema = Record<string, unknown>;

/**
 * Collects routes as they are registered and turns their zod schemas into an
 * OpenAPI 3.1 document (whose schema dialect is JSON Schema 2020-12, which zod
 * emits natively). Named subschemas (.meta({ id })) become components.
 */
export function createOpenApiRegistry(info: { title: string; version: string; description: string }) {
  const paths: Record<string, Record<string, unknown>> = {};
  const components: Record<string, JsonSchema> = {};

  function toSchema(schema: z.ZodType, io: "input" | "output"): JsonSchema {
    const json = z.toJSONSchema(schema, { target: "draft-2020-12", unrepresentable: "any", io }) as JsonSchema;
    const defs = (json.$defs ?? {}) as Record<string, JsonSchema>;
    delete json.$defs;
    delete json.$schema;
    const rewrite = <T>(v: T): T => JSON.parse(JSON.stringify(v).replaceAll('"#/$defs/', '"#/components/schemas/'));
    for (const [id, def] of Object.entries(defs)) components[id] ??= rewrite(def);
    return rewrite(json);
  }

  function add(method: string, path: string, spec: RouteSpec<z.ZodType | undefined, z.ZodType | undefined>) {
    const oaPath = path.replace(/:([A-Za-z]+)/g, "{$1}");
    const parameters: unknown[] = [...path.matchAll(/:([A-Za-z]+)/g)].map((m) => ({ name: m[1], in: "path", required: true, schema: { type: "string" } }));
    if (spec.query) {
      const q = toSchema(spec.query, "input") as { properties?: Record<string, JsonSchema>; required?: string[] };
      for (const [name, schema] of Object.entries(q.properties ?? {})) {
        parameters.push({ name, in: "query", required: q.required?.includes(name) ?? false, schema, ...(schema.description ? { description: schema.description } : {}) });
      }
    }
    const errors = new Set<ErrorCode>([...(spec.errors ?? []), ...(spec.auth ? (["UNAUTHORIZED", "TOKEN_EXPIRED"] as const) : []), ...(spec.body ? (["VALIDATION_ERROR", "INVALID_JSON"] as const) : []), ...(spec.query ? (["VALIDATION_ERROR"] as const) : []), ...(spec.database === false ? [] : (["SERVICE_UNAVAILABLE"] as const))]);
    const byStatus = new Map<number, ErrorCode[]>();
    for (const code of errors) byStatus.set(ERROR_CODES[code].status, [...(byStatus.get(ERROR_CODES[code].status) ?? []), code]);
    const responses: Record<string, unknown> = {
      [String(spec.status ?? 200)]: { description: "OK", content: { "application/json": { schema: toSchema(spec.response, "output") } } },
    };
    for (const [status, codes] of byStatus) {
      responses[String(status)] = {
        description: codes.map((c) => `\`${c}\`: ${ERROR_CODES[c].description}`).join("\n\n"),
        content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
      };
    }
    paths[oaPath] ??= {};
    paths[oaPath][method] = {
      summary: spec.summary,
      ...(spec.description ? { description: spec.description } : {}),
      tags: [spec.tag],
      ...(spec.auth ? { security: [{ bearer: [] }] } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(spec.body ? { requestBody: { required: true, content: { "application/json": { schema: toSchema(spec.body, "input") } } } } : {}),
      responses,
    };
  }

  function document() {
    toSchema(ErrorBody, "output");
    return {
      openapi: "3.1.0",
      info,
      paths,
      components: { schemas: components, securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "accessToken from POST /auth/verify or /auth/refresh" } } },
    };
  }

  return { add, document };
}
export type OpenApiRegistry = ReturnType<typeof createOpenApiRegistry>;
