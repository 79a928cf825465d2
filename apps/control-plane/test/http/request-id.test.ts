import { sqliteDatabase as sqlite } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomId } from "../../src/services/ids";
import type { Fields, Logger } from "../../src/services/logger";
import { type Harness, startHarness } from "../support/harness";

describe("X-Request-Id", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(sqlite);
  });
  afterAll(() => h.close());

  it("is on every response, ours when the caller sent none, and the same id as in an error body", async () => {
    const ok = await h.call("GET", "/health");
    expect(ok.headers.get("x-request-id")).toMatch(/^req_[0-9a-f-]{36}$/);
    const other = await h.call("GET", "/health");
    expect(other.headers.get("x-request-id")).not.toBe(ok.headers.get("x-request-id"));
    const missing = await h.call("GET", "/nodes/nope");
    expect(missing.status).toBe(404);
    expect(missing.json.error.requestId).toBe(missing.headers.get("x-request-id"));
  });

  it("keeps a caller's short plain id, and replaces one that is long or carries other characters", async () => {
    for (const id of ["trace-123", "abc_DEF=", "x".repeat(64)]) {
      const r = await h.call("GET", "/nodes/nope", { headers: { "x-request-id": id } });
      expect(r.headers.get("x-request-id"), id).toBe(id);
      expect(r.json.error.requestId).toBe(id);
    }
    // Hono's rule: word characters, - and =. A dot, which our own middleware let through, is no longer kept.
    for (const id of ["x".repeat(65), "a b", "a/b", "<script>", "a.b"]) {
      const r = await h.call("GET", "/health", { headers: { "x-request-id": id } });
      expect(r.headers.get("x-request-id"), id).toMatch(/^req_/);
    }
  });
});

/** A logger that keeps its lines, with the fields its children bound. */
function recordingLogger(lines: Array<{ msg: string; fields: Fields }>, bound: Fields = {}): Logger {
  const at = (msg: string, fields?: Fields) => void lines.push({ msg, fields: { ...bound, ...fields } });
  return { debug: at, info: at, warn: at, error: at, child: (fields) => recordingLogger(lines, { ...bound, ...fields }) };
}

describe("a request's log lines", () => {
  it("carry its request id, as does the 500 the client gets for a fault it cannot see", async () => {
    const lines: Array<{ msg: string; fields: Fields }> = [];
    const ids = (prefix: string) => {
      if (prefix === "node") throw new Error("the id generator broke");
      return randomId(prefix);
    };
    const h = await startHarness(sqlite, { overrides: { log: recordingLogger(lines), ids } });
    try {
      const { token } = await h.signIn();
      const r = await h.call("POST", "/operator/nodes", {
        token,
        headers: { "x-request-id": "trace-500" },
        body: { name: "rig", region: "eu-west", country: "DE", hourlyRateCents: 1, maxDeployments: 1 },
      });
      expect(r.status).toBe(500);
      expect(r.json.error).toMatchObject({ code: "INTERNAL_ERROR", requestId: "trace-500" });
      expect(JSON.stringify(r.json)).not.toContain("id generator");
      const logged = lines.find((l) => l.msg === "unhandled error");
      expect(logged?.fields.requestId).toBe("trace-500");
      expect(String(logged?.fields.err)).toContain("the id generator broke");
    } finally {
      await h.close();
    }
  });
});
