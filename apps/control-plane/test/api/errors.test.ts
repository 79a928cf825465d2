import { afterAll, beforeAll, expect, it } from "vitest";
import { newWallet, startHarness, type Harness } from "../support/harness";
import { describeEachDatabase } from "@cm/testkit";


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
    const r = await h.call("POST", "/operator/nodes", { token, body: { name: 5, region: "mars", country: "Germany", hourlyRateCents: -1, maxDeployments: 1.5, extra: true } });
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
    const emoji = await h.call("POST", "/operator/nodes", { token, body: { name: "rig \uD83D\uDE80", region: "eu-west", country: "DE", hourlyRateCents: 10, maxDeployments: 1 } });
    expect(emoji.status).toBe(201);
    expect(emoji.json.node.name).toBe("rig 🚀");
    expect((await h.call("GET", "/operator/nodes", { token })).json.nodes.length).toBe(before + 1);

    const nodeId = emoji.json.node.id;
    for (const body of [{ nodeId, customImage: "busybox", name: "a\u0000b" }, { nodeId, customImage: "busybox", env: { SECRET: "x\u0000y" } }, { nodeId, customImage: "busybox", env: { SECRET: "\uDFFF" } }]) {
      const r = await h.call("POST", "/deployments", { token, body });
      expect(r.status).toBe(400);
      expect(r.json.error.code).toBe("VALIDATION_ERROR");
      expect(r.json.error.details[0].field).toMatch(/^(name|env\.SECRET)$/);
    }
  });

  it("answers an oversized body with 413 PAYLOAD_TOO_LARGE, not a crash", async () => {
    const big = JSON.stringify({ walletAddress: "x".repeat(2 * 1024 * 1024) });
    const r = await h.call("POST", "/auth/nonce", { raw: big, headers: { "content-type": "application/json" } });
    expect(r.status).toBe(413);
    expect(r.json.error.code).toBe("PAYLOAD_TOO_LARGE");
    expect((await h.call("GET", "/health")).status).toBe(200);
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
    await Promise.all(Array.from({ length: 50 }, (_, i) => h.call("POST", "/auth/verify", { raw: "x".repeat(i), headers: { "content-type": "application/json" } })));
    expect((await h.call("POST", "/auth/nonce", { body: { walletAddress: w.address } })).status).toBe(200);
  });
});
