import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Harness, newWallet, startHarness } from "../support/harness";

describeEachDatabase("bad input on $name", (db) => {
  let h: Harness;
  let token: string;
  beforeAll(async () => {
    h = await startHarness(db, { config: { MAX_BODY_BYTES: 1024 * 1024 } });
    token = (await h.signIn()).token;
  });
  afterAll(() => h.close());

  const shape = (r: { json: any; headers: Headers }) => {
    expect(Object.keys(r.json)).toEqual(["error"]);
    expect(typeof r.json.error.code).toBe("string");
    expect(typeof r.json.error.message).toBe("string");
    expect(r.json.error.requestId).toBe(r.headers.get("x-request-id"));
  };

  it("answers malformed JSON with INVALID_JSON", async () => {
    for (const raw of ["{", "nope", '{"walletAddress": }']) {
      const r = await h.call("POST", "/auth/nonce", { raw, headers: { "content-type": "application/json" } });
      expect(r.status).toBe(400);
      expect(r.json.error.code).toBe("INVALID_JSON");
      shape(r);
    }
  });

  it("answers wrong types and unknown fields with VALIDATION_ERROR and per-field details", async () => {
    const r = await h.call("POST", "/operator/nodes", {
      token,
      body: { name: 5, region: "mars", country: "Germany", hourlyRateCents: -1, maxDeployments: 1.5, extra: true },
    });
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe("VALIDATION_ERROR");
    const fields = r.json.error.details.map((d: { field: string }) => d.field);
    for (const f of ["name", "region", "country", "hourlyRateCents", "maxDeployments"]) expect(fields).toContain(f);
    expect(JSON.stringify(r.json.error.details)).toContain("extra");
    shape(r);
    const arr = await h.call("POST", "/auth/nonce", { body: [1, 2] });
    expect(arr.json.error.code).toBe("VALIDATION_ERROR");
    const nul = await h.call("POST", "/auth/nonce", { body: null });
    expect(nul.json.error.code).toBe("VALIDATION_ERROR");
  });

  it("refuses text no database can hold (NUL, an unpaired surrogate) with VALIDATION_ERROR naming the field, and stores nothing", async () => {
    const before = (await h.call("GET", "/operator/nodes", { token })).json.nodes.length;
    for (const name of ["rig\u0000one", "rig \uD800", "rig \uDC00 two"]) {
      const r = await h.call("POST", "/operator/nodes", { token, body: { name, region: "eu-west", country: "DE", hourlyRateCents: 10, maxDeployments: 1 } });
      expect(r.status).toBe(400);
      expect(r.json.error.code).toBe("VALIDATION_ERROR");
      expect(r.json.error.details.map((d: { field: string }) => d.field)).toEqual(["name"]);
      shape(r);
    }
    // A well-formed pair (an emoji) is text like any other.
    const emoji = await h.call("POST", "/operator/nodes", {
      token,
      body: { name: "rig \uD83D\uDE80", region: "eu-west", country: "DE", hourlyRateCents: 10, maxDeployments: 1 },
    });
    expect(emoji.status).toBe(201);
    expect(emoji.json.node.name).toBe("rig 🚀");
    expect((await h.call("GET", "/operator/nodes", { token })).json.nodes.length).toBe(before + 1);

    const nodeId = emoji.json.node.id;
    for (const body of [
      { nodeId, customImage: "busybox", name: "a\u0000b" },
      { nodeId, customImage: "busybox", env: { SECRET: "x\u0000y" } },
      { nodeId, customImage: "busybox", env: { SECRET: "\uDFFF" } },
    ]) {
      const r = await h.call("POST", "/deployments", { token, body });
      expect(r.status).toBe(400);
      expect(r.json.error.code).toBe("VALIDATION_ERROR");
      expect(r.json.error.details[0].field).toMatch(/^(name|env\.SECRET)$/);
    }
  });

  it("refuses control characters and bidi overrides in the names operators and tenants give, naming the field", async () => {
    const names = ["rig\u001b]0;title\u0007", "rig\tone", "rig\u007f", "rig\u009b2J", "rig\u202eeno", "rig\u2066x\u2069"];
    for (const name of names) {
      const r = await h.call("POST", "/operator/nodes", { token, body: { name, region: "eu-west", country: "DE", hourlyRateCents: 10, maxDeployments: 1 } });
      expect(r.status, JSON.stringify(name)).toBe(400);
      expect(r.json.error.code).toBe("VALIDATION_ERROR");
      expect(r.json.error.details).toEqual([expect.objectContaining({ field: "name", message: expect.stringContaining("control characters") })]);
      shape(r);
    }
    const node = await h.call("POST", "/operator/nodes", {
      token,
      body: { name: "Ünïcode 🚀 rig", region: "eu-west", country: "DE", hourlyRateCents: 10, maxDeployments: 1 },
    });
    expect(node.status).toBe(201);
    const r = await h.call("POST", "/deployments", { token, body: { nodeId: node.json.node.id, customImage: "busybox", name: "web\u001b[2J" } });
    expect(r.status).toBe(400);
    expect(r.json.error.details[0].field).toBe("name");
  });

  it("answers the same 400 on both databases for ids, searches and filters no column can hold", async () => {
    for (const path of ["/nodes/%00", "/templates/a%00b", "/deployments/%00", "/deployments/%00/logs", `/nodes/${"n".repeat(200)}`]) {
      const r = await h.call("GET", path, { token });
      expect(r.status, path).toBe(400);
      expect(r.json.error.code).toBe("VALIDATION_ERROR");
      expect(r.json.error.details[0].field).toMatch(/^(id|slug|idOrSlug)$/);
      shape(r);
    }
    for (const path of ["/deployments/%00/stop", "/deployments/%00/start"]) expect((await h.call("POST", path, { token })).status, path).toBe(400);
    expect((await h.call("DELETE", "/deployments/%00", { token })).status).toBe(400);
    expect((await h.call("DELETE", "/operator/nodes/%00", { token })).status).toBe(400);
    const search = await h.call("GET", "/templates?search=%00");
    expect(search.status).toBe(400);
    expect(search.json.error.details[0].field).toBe("search");
    for (const body of [
      { nodeId: "\u0000", customImage: "busybox" },
      { nodeId: "node_1", templateId: "t\u0000" },
    ]) {
      expect((await h.call("POST", "/deployments", { token, body })).status).toBe(400);
    }
    // Filters past the integer columns they are compared with: refused, not a 500 on PostgreSQL.
    for (const q of ["minGpuVram=2147483648", "minCpuCores=9007199254740991", "minRamMb=2147483648", "maxHourlyRate=2147483648"]) {
      const r = await h.call("GET", `/nodes?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.json.error.code).toBe("VALIDATION_ERROR");
    }
    expect((await h.call("GET", "/nodes?minRamMb=2147483647")).status).toBe(200);
  });

  it("reads a fractional maxHourlyRate as whole credits, the same on both databases", async () => {
    const cheap = await h.call("POST", "/operator/nodes", {
      token,
      body: { name: "one-credit", region: "eu-west", country: "DE", hourlyRateCents: 1, maxDeployments: 1 },
    });
    await h.call("POST", "/operator/nodes", { token, body: { name: "two-credits", region: "eu-west", country: "DE", hourlyRateCents: 2, maxDeployments: 1 } });
    const r = await h.call("GET", "/nodes?maxHourlyRate=1.5&limit=100");
    expect(r.status).toBe(200);
    const rates = r.json.nodes.map((n: { hourlyRateCents: number }) => n.hourlyRateCents);
    expect(rates.every((rate: number) => rate <= 1)).toBe(true);
    // Nodes are offline until an agent connects, and the catalogue lists them too: the 1-credit one is there.
    expect(r.json.nodes.map((n: { id: string }) => n.id)).toContain(cheap.json.node.id);
  });

  it("answers an oversized body with 413 PAYLOAD_TOO_LARGE, not a crash", async () => {
    const big = JSON.stringify({ walletAddress: "x".repeat(2 * 1024 * 1024) });
    const r = await h.call("POST", "/auth/nonce", { raw: big, headers: { "content-type": "application/json" } });
    expect(r.status).toBe(413);
    expect(r.json.error.code).toBe("PAYLOAD_TOO_LARGE");
    expect((await h.call("GET", "/health")).status).toBe(200);
  });

  it("validates an empty or missing body as {}, naming the missing fields", async () => {
    const empty = { raw: "", headers: { "content-type": "application/json" } };
    for (const init of [empty, {}]) {
      const r = await h.call("POST", "/auth/nonce", init);
      expect(r.status, JSON.stringify(init)).toBe(400);
      expect(r.json.error.code).toBe("VALIDATION_ERROR");
      expect(r.json.error.details.map((d: { field: string }) => d.field)).toEqual(["walletAddress"]);
      shape(r);
    }
  });

  it("answers a non-JSON content type with 415", async () => {
    const r = await h.call("POST", "/auth/nonce", { raw: "walletAddress=x", headers: { "content-type": "application/x-www-form-urlencoded" } });
    expect(r.status).toBe(415);
    expect(r.json.error.code).toBe("UNSUPPORTED_MEDIA_TYPE");
  });

  it("answers unknown routes with 404 NOT_FOUND in the same shape", async () => {
    const r = await h.call("GET", "/no/such/route");
    expect(r.status).toBe(404);
    expect(r.json.error.code).toBe("NOT_FOUND");
    shape(r);
  });

  it("answers bad query values with VALIDATION_ERROR", async () => {
    for (const q of ["page=0", "page=abc", "limit=-5", "minGpuVram=lots", "region=moon", "hasGpu=maybe", "status=gone", "bogus=1"]) {
      const r = await h.call("GET", `/nodes?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.json.error.code).toBe("VALIDATION_ERROR");
    }
  });

  it("keeps serving after a burst of garbage", async () => {
    const w = newWallet();
    await Promise.all(
      Array.from({ length: 50 }, (_, i) => h.call("POST", "/auth/verify", { raw: "x".repeat(i), headers: { "content-type": "application/json" } })),
    );
    expect((await h.call("POST", "/auth/nonce", { body: { walletAddress: w.address } })).status).toBe(200);
  });
});
