import { sqliteDatabase as sqlite } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Operation } from "../contract/support/document";
import { type Harness, startHarness } from "../support/harness";

describe("OpenAPI document and docs", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(sqlite);
  });
  afterAll(() => h.close());

  it("describes every route of the spec, with schemas and error responses", async () => {
    const r = await h.call("GET", "/openapi.json");
    expect(r.status).toBe(200);
    expect(r.json.openapi).toBe("3.1.0");
    const want: Array<[string, string]> = [
      ["post", "/auth/nonce"],
      ["post", "/auth/verify"],
      ["post", "/auth/refresh"],
      ["get", "/auth/me"],
      ["get", "/nodes"],
      ["get", "/nodes/{id}"],
      ["get", "/templates"],
      ["get", "/templates/{idOrSlug}"],
      ["post", "/deployments"],
      ["get", "/deployments"],
      ["get", "/deployments/{id}"],
      ["post", "/deployments/{id}/start"],
      ["post", "/deployments/{id}/stop"],
      ["delete", "/deployments/{id}"],
      ["get", "/deployments/{id}/logs"],
      ["post", "/operator/nodes"],
      ["get", "/operator/nodes"],
      ["delete", "/operator/nodes/{id}"],
    ];
    for (const [m, p] of want) expect(r.json.paths[p]?.[m], `${m} ${p}`).toBeDefined();
    const create = r.json.paths["/deployments"].post;
    expect(create.security).toEqual([{ bearer: [] }]);
    expect(create["x-scope"]).toBe("deploy");
    expect(create.requestBody.content["application/json"].schema.properties).toHaveProperty("customImage");
    expect(create.responses["402"].description).toContain("INSUFFICIENT_CREDITS");
    const nodesQuery = r.json.paths["/nodes"].get.parameters.map((p: { name: string }) => p.name);
    for (const q of ["status", "hasGpu", "minGpuVram", "minCpuCores", "minRamMb", "region", "maxHourlyRate", "page", "limit"]) expect(nodesQuery).toContain(q);
    // Every $ref resolves inside the document.
    const refs = [...JSON.stringify(r.json).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]!);
    for (const ref of refs) expect(r.json.components.schemas[ref], ref).toBeDefined();
    expect(r.json.components.schemas.Error).toBeDefined();
  });

  it("is complete: ids, tags, security, servers, bounds, nullable fields and the errors each route can answer (issue 23 item 4)", async () => {
    const doc = (await h.call("GET", "/openapi.json")).json;
    expect(doc.info).toMatchObject({ title: expect.any(String), version: expect.any(String), description: expect.stringContaining("X-Request-Id") });
    expect(doc.servers).toEqual([{ url: "/", description: expect.any(String) }]);
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" });
    expect(doc).not.toHaveProperty("webhooks");
    const ops = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item as Record<string, Operation>).map(([method, op]) => ({ where: `${method} ${path}`, path, method, op })),
    );
    const ids = ops.map((o) => o.op.operationId);
    expect(ids.every((id) => typeof id === "string" && id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    const tags = new Set(doc.tags.map((t: { name: string }) => t.name));
    for (const { where, op } of ops) {
      expect(op.tags?.length, where).toBe(1);
      expect(tags.has(op.tags?.[0]), where).toBe(true);
      expect(op.description, where).toEqual(expect.any(String));
      for (const response of Object.values(op.responses)) expect(response.headers?.["X-Request-Id"], where).toEqual({ $ref: "#/components/headers/RequestId" });
    }
    const authed = new Set([
      "get /auth/me",
      "post /auth/api-keys",
      "get /auth/api-keys",
      "delete /auth/api-keys/{id}",
      "get /operator/nodes",
      "post /operator/nodes",
      "delete /operator/nodes/{id}",
      "patch /operator/nodes/{id}",
      "post /operator/nodes/{id}/maintenance",
      "get /operator/nodes/{id}/deployments",
      "get /operator/earnings",
      "get /operator/earnings/transactions",
      "post /operator/payouts",
      "get /operator/payouts",
      "get /operator/payouts/{id}",
      "post /registry-credentials",
      "get /registry-credentials",
      "delete /registry-credentials/{id}",
    ]);
    for (const { where, path, op } of ops) {
      const isAuthed = authed.has(where) || path.startsWith("/deployments") || path.startsWith("/credits");
      expect(op.security, where).toEqual(isAuthed ? [{ bearer: [] }] : []);
    }

    const query = (path: string, name: string) => doc.paths[path].get.parameters.find((p: { name: string }) => p.name === name).schema;
    expect(query("/nodes", "hasGpu")).toMatchObject({ type: "boolean", description: expect.stringContaining("1 and 0") });
    expect(query("/templates", "requiresGpu")).toMatchObject({ type: "boolean" });
    expect(query("/nodes", "minGpuVram")).toMatchObject({ type: "integer", minimum: 0, maximum: 2147483647 });
    expect(query("/nodes", "page")).toMatchObject({ type: "integer", minimum: 1, default: 1 });
    expect(query("/deployments/{id}/logs", "tail")).toMatchObject({ type: "integer", minimum: 1, maximum: 10000, default: 100 });
    const createNode = doc.paths["/operator/nodes"].post.requestBody.content["application/json"].schema.properties;
    expect(createNode.maxDeployments).toMatchObject({ type: "integer", minimum: 1, maximum: 256 });
    expect(createNode.hourlyRateCents).toMatchObject({ minimum: 0, maximum: 1000000 });
    // Text no database can hold (NUL, a lone surrogate) is refused, and the patterns say so; a name must not be blank.
    const storable = new RegExp(doc.paths["/auth/nonce"].post.requestBody.content["application/json"].schema.properties.walletAddress.pattern);
    expect(["abc", "🚀", ""].map((v) => storable.test(v))).toEqual([true, true, true]);
    expect(["a\u0000b", "a\uD800", "\uDC00a"].map((v) => storable.test(v))).toEqual([false, false, false]);
    const name = new RegExp(createNode.name.pattern);
    expect(["rig", " rig ", " ", ""].map((v) => name.test(v))).toEqual([true, true, false, false]);
    expect(["rig\u001b[2J", "rig\u009b", "rig\u202e", "rig 🚀"].map((v) => name.test(v))).toEqual([false, false, false, true]);
    expect(query("/nodes", "page").maximum).toBe(Number.MAX_SAFE_INTEGER);
    expect(query("/nodes", "limit").maximum).toBe(100);
    const env = doc.paths["/deployments"].post.requestBody.content["application/json"].schema.properties.env;
    expect(env).toMatchObject({ maxProperties: 100, propertyNames: { pattern: "^[A-Za-z_][A-Za-z0-9_]*$" } });
    const createDeployment = doc.paths["/deployments"].post.requestBody.content["application/json"].schema.properties;
    expect(createDeployment.command).toMatchObject({ type: "array", minItems: 1, maxItems: 256, items: { maxLength: 4096, pattern: expect.any(String) } });
    expect(createDeployment.maxRestarts).toMatchObject({ type: "integer", minimum: 1, maximum: 10 });
    expect(createDeployment.restart).toMatchObject({ enum: ["no", "on-failure"] });
    // Placement (issue 30): nodeId may be left out, the catalogue's filter names place it, and the refusal is documented.
    expect(doc.paths["/deployments"].post.requestBody.content["application/json"].schema.required ?? []).not.toContain("nodeId");
    for (const f of ["gpuCount", "minGpuVram", "gpuModel", "region", "maxHourlyRate"]) expect(createDeployment[f], f).toBeDefined();
    expect(doc.paths["/deployments"].post.responses["409"].description).toContain("NO_NODE_FITS");
    const estimate = doc.paths["/deployments/estimate"].post;
    expect(estimate.security).toEqual([{ bearer: [] }]);
    expect(estimate.description).toContain("creating nothing and holding nothing");
    expect(estimate.responses["200"].content["application/json"].schema.$ref).toBe("#/components/schemas/DeploymentEstimate");
    expect(doc.components.schemas.Deployment.properties.command.type).toEqual(["array", "null"]);
    expect(doc.components.schemas.Deployment.required).toEqual(expect.arrayContaining(["command", "entrypoint", "restart", "maxRestarts", "restartCount"]));
    expect(doc.components.schemas.NodeDetail.properties.lastHeartbeat.type).toEqual(["string", "null"]);
    // Private images: the credential's shape has no secret, and a deployment says which one it pulls with.
    expect(Object.keys(doc.components.schemas.RegistryCredential.properties).sort()).toEqual(["createdAt", "id", "lastUsedAt", "registry", "username"]);
    expect(doc.components.schemas.Deployment.properties.registryCredentialId.type).toEqual(["string", "null"]);
    expect(doc.paths["/deployments"].post.responses["422"].description).toContain("REGISTRY_CREDENTIAL_MISMATCH");
    expect(doc.components.schemas.NodeDetail.required).toContain("lastHeartbeat");
    // Node controls (issue 28): maintenance has its refusal, and uptime says how it is counted.
    expect(doc.paths["/deployments"].post.responses["409"].description).toContain("NODE_IN_MAINTENANCE");
    expect(doc.components.schemas.NodeSummary.properties.uptimePercent.description).toContain("heartbeat");
    expect(doc.components.schemas.NodeDetail.required).toEqual(expect.arrayContaining(["maintenanceReason", "maintenanceSince", "uptime"]));
    // A tenant reading the document learns what a node's "off" egress policy means for them, and that it may be unknown.
    expect(doc.components.schemas.NodeSummary.properties.egressPolicy).toMatchObject({
      type: ["string", "null"],
      enum: ["enforced", "off", null],
      description: expect.stringContaining("off: the operator turned that firewall off"),
    });
    expect(query("/nodes", "egressPolicy")).toMatchObject({ enum: ["enforced", "off"] });
    expect(doc.components.schemas.Deployment.properties.diskGb.type).toEqual(["integer", "null"]);

    const statuses = (where: string) => {
      const [method, path] = where.split(" ") as [string, string];
      return Object.keys(doc.paths[path][method].responses);
    };
    for (const { where, op } of ops) {
      const has = statuses(where);
      expect(op.responses["414"]?.description, where).toContain("URI_TOO_LONG");
      expect(op.responses["431"]?.description, where).toContain("HEADERS_TOO_LARGE");
      expect(has.includes("413") && has.includes("415"), `${where} 413/415`).toBe(op.requestBody !== undefined);
    }
    for (const where of ["post /auth/nonce", "post /auth/verify", "post /auth/refresh", "post /operator/nodes"]) {
      expect(statuses(where), where).toContain("429");
      const [method, path] = where.split(" ") as [string, string];
      expect(doc.paths[path][method].responses["429"].headers["Retry-After"], where).toBeDefined();
    }
    expect(doc.paths["/nodes"].get.responses["503"].headers["Retry-After"]).toBeDefined();
    expect(doc.paths["/nodes/{id}"].get.responses["400"].description).toContain("VALIDATION_ERROR");
  });

  it("renders the docs page with its assets served locally", async () => {
    const page = await h.call("GET", "/docs");
    expect(page.status).toBe(200);
    expect(page.text).toContain("/openapi.json");
    const js = await h.call("GET", "/docs/swagger-ui-bundle.js");
    expect(js.status).toBe(200);
    expect(js.text.length).toBeGreaterThan(100_000);
    expect((await h.call("GET", "/docs/../package.json")).status).toBe(404);
  });
});
