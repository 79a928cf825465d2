import { TEMPLATE_CATEGORIES } from "@cm/protocol";
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

describeEachDatabase("templates on $name", (db) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(db);
  });
  afterAll(() => h.close());

  it("has a real template in every category, without signing in", async () => {
    const r = await h.call("GET", "/templates");
    expect(r.status).toBe(200);
    for (const c of TEMPLATE_CATEGORIES)
      expect(
        r.json.templates.some((t: { category: string }) => t.category === c),
        c,
      ).toBe(true);
    for (const slug of ["vllm-openai", "ollama", "comfyui", "jupyter-pytorch", "cuda-base"]) {
      expect(r.json.templates.map((t: { slug: string }) => t.slug)).toContain(slug);
    }
    expect(Object.keys(r.json.templates[0]).sort()).toEqual(["category", "description", "id", "minGpuVram", "name", "requiresGpu", "slug"]);
  });

  it("filters by category, requiresGpu and a case-insensitive search over name and description", async () => {
    const llm = (await h.call("GET", "/templates?category=llm")).json.templates;
    expect(llm.length).toBeGreaterThanOrEqual(2);
    expect(llm.every((t: { category: string }) => t.category === "llm")).toBe(true);
    const cpu = (await h.call("GET", "/templates?requiresGpu=false")).json.templates;
    expect(cpu.length).toBeGreaterThan(0);
    expect(cpu.every((t: { requiresGpu: boolean }) => !t.requiresGpu)).toBe(true);
    expect((await h.call("GET", "/templates?search=OLLAMA")).json.templates.map((t: { slug: string }) => t.slug)).toEqual(["ollama"]);
    const byDescription = (await h.call("GET", "/templates?search=openai-compatible")).json.templates;
    expect(byDescription.map((t: { slug: string }) => t.slug)).toContain("vllm-openai");
    expect((await h.call("GET", "/templates?search=100%25")).json.templates).toEqual([]);
    expect((await h.call("GET", "/templates?category=games")).status).toBe(400);
  });

  it("finds a template by id or slug with its detail fields, and 404 otherwise", async () => {
    const bySlug = await h.call("GET", "/templates/vllm-openai");
    expect(bySlug.status).toBe(200);
    const t = bySlug.json.template;
    expect(t).toMatchObject({ containerImage: "vllm/vllm-openai:v0.6.4", requiresGpu: true, category: "llm" });
    expect(t.ports).toEqual([{ internal: 8000, protocol: "http", description: expect.any(String) }]);
    expect(t.estimatedPullTime).toBeGreaterThan(0);
    expect(t.minRamMb).toBeGreaterThan(0);
    const byId = await h.call("GET", `/templates/${t.id}`);
    expect(byId.json.template).toEqual(t);
    const missing = await h.call("GET", "/templates/nope");
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe("TEMPLATE_NOT_FOUND");
  });
});
