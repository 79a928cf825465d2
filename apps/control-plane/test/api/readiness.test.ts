import { sqliteDatabase as sqlite } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

// The fault suite (test/faults/db-outage.test.ts) stops a real PostgreSQL; here
// the control plane is told the database is unreachable, as a failed query tells it.
describe("liveness, readiness and a database that does not answer", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(sqlite);
  });
  afterAll(() => h.close());

  it("answers /health and /ready, and documents both and every route's 503", async () => {
    expect((await h.call("GET", "/health")).json).toEqual({ status: "ok" });
    expect((await h.call("GET", "/ready")).json).toEqual({ status: "ready" });
    const doc = (await h.call("GET", "/openapi.json")).json;
    expect(doc.paths["/health"].get.responses["503"]).toBeUndefined();
    expect(doc.paths["/ready"].get.responses["503"].description).toContain("SERVICE_UNAVAILABLE");
    expect(doc.paths["/deployments"].get.responses["503"].description).toContain("SERVICE_UNAVAILABLE");
    expect(doc.paths["/nodes"].get.responses["503"].description).toContain("SERVICE_UNAVAILABLE");
  });

  it("fails API calls at once with 503, the one error shape and Retry-After while the database is down; /health stays 200", async () => {
    expect(h.deps.dbHealth.noteError(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }))).toBe(true);
    const r = await h.call("GET", "/nodes");
    expect(r.status).toBe(503);
    expect(r.headers.get("retry-after")).toBe("2");
    expect(r.json.error).toMatchObject({ code: "SERVICE_UNAVAILABLE", requestId: expect.any(String) });
    expect((await h.call("GET", "/health")).status).toBe(200);
    // The embedded database answers the readiness probe, which clears the mark.
    expect((await h.call("GET", "/ready")).status).toBe(200);
    expect((await h.call("GET", "/nodes")).status).toBe(200);
  });

  it("does not take a query the database refused for an outage", () => {
    expect(h.deps.dbHealth.noteError(Object.assign(new Error("duplicate key"), { code: "23505" }))).toBe(false);
    expect(h.deps.dbHealth.up).toBe(true);
  });
});
