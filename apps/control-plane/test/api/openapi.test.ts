import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../support/harness";
import { sqliteDatabase as sqlite } from "@cm/testkit";


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
      ["post", "/auth/nonce"], ["post", "/auth/verify"], ["post", "/auth/refresh"], ["get", "/auth/me"],
      ["get", "/nodes"], ["get", "/nodes/{id}"], ["get", "/templates"], ["get", "/templates/{idOrSlug}"],
      ["post", "/deployments"], ["get", "/deployments"], ["get", "/deployments/{id}"], ["post", "/deployments/{id}/start"],
      ["post", "/deployments/{id}/stop"], ["delete", "/deployments/{id}"], ["get", "/deployments/{id}/logs"],
      ["post", "/operator/nodes"], ["get", "/operator/nodes"], ["delete", "/operator/nodes/{id}"],
    ];
    for (const [m, p] of want) expect(r.json.paths[p]?.[m], `${m} ${p}`).toBeDefined();
    const create = r.json.paths["/deployments"].post;
    expect(create.security).toEqual([{ bearer: [] }]);
    expect(create.requestBody.content["application/json"].schema.properties).toHaveProperty("customImage");
    expect(create.responses["402"].description).toContain("INSUFFICIENT_CREDITS");
    const nodesQuery = r.json.paths["/nodes"].get.parameters.map((p: { name: string }) => p.name);
    for (const q of ["status", "hasGpu", "minGpuVram", "minCpuCores", "minRamMb", "region", "maxHourlyRate", "page", "limit"]) expect(nodesQuery).toContain(q);
    // Every $ref resolves inside the document.
    const refs = [...JSON.stringify(r.json).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]!);
    for (const ref of refs) expect(r.json.components.schemas[ref], ref).toBeDefined();
    expect(r.json.components.schemas.Error).toBeDefined();
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
