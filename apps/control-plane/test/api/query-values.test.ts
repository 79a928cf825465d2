import { sqliteDatabase as sqlite } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

// Query parsing is the same whatever the database: SQLite only.
describe("query values", () => {
  let h: Harness;
  let token: string;
  let deploymentId: string;
  beforeAll(async () => {
    h = await startHarness(sqlite);
    const user = await h.signIn();
    token = user.token;
    await h.grantCredits(user.user.id, 1000);
    const node = await h.onlineNode(token);
    const created = await h.call("POST", "/deployments", { token, body: { nodeId: node.id, customImage: "busybox" } });
    if (created.status !== 201) throw new Error(`deployment create failed: ${created.text}`);
    deploymentId = created.json.deployment.id;
  });
  afterAll(() => h.close());

  const notDecimal = ["1e2", "0x10", "%203", "3%20", "1.0", "+3", "", "0b11", "Infinity", "1_000", "%EF%BC%93" /* a fullwidth 3 */];

  it("reads whole numbers from plain decimal digits only: 400 VALIDATION_ERROR naming the parameter otherwise", async () => {
    const cases: Array<[path: string, name: string, authed?: boolean]> = [
      ["/nodes", "page"],
      ["/nodes", "limit"],
      ["/nodes", "minGpuVram"],
      ["/nodes", "minCpuCores"],
      ["/nodes", "minRamMb"],
      ["/deployments", "page", true],
      ["/credits/transactions", "limit", true],
      [`/deployments/${deploymentId}/logs`, "tail", true],
    ];
    for (const [path, name, authed] of cases) {
      for (const value of notDecimal) {
        const r = await h.call("GET", `${path}?${name}=${value}`, authed ? { token } : {});
        expect(r.status, `${path}?${name}=${value}`).toBe(400);
        expect(r.json.error.code).toBe("VALIDATION_ERROR");
        expect(r.json.error.details.map((d: { field: string }) => d.field)).toEqual([name]);
      }
    }
  });

  it("takes plain decimals, a fraction where a number may have one, and the bounds as before", async () => {
    for (const q of ["page=2", "limit=100", "page=007", "minGpuVram=0", "minRamMb=2147483647", "maxHourlyRate=1.5", "maxHourlyRate=3"]) {
      expect((await h.call("GET", `/nodes?${q}`)).status, q).toBe(200);
    }
    expect((await h.call("GET", "/nodes?limit=100")).json.pagination.limit).toBe(100);
    expect((await h.call("GET", `/deployments/${deploymentId}/logs?tail=10000`, { token })).status).toBe(200);
    for (const q of [
      "maxHourlyRate=1e2",
      "maxHourlyRate=.5",
      "maxHourlyRate=1.",
      "maxHourlyRate=0x10",
      "page=-1",
      "limit=0",
      "limit=101",
      "minGpuVram=2147483648",
    ]) {
      const r = await h.call("GET", `/nodes?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.json.error.code).toBe("VALIDATION_ERROR");
    }
    expect((await h.call("GET", `/deployments/${deploymentId}/logs?tail=10001`, { token })).status).toBe(400);
  });

  it("names each unknown parameter and body field in the details", async () => {
    const q = await h.call("GET", "/nodes?bogus=1&other=2");
    expect(q.status).toBe(400);
    expect(q.json.error.details).toEqual([
      { field: "bogus", message: "is not a known parameter" },
      { field: "other", message: "is not a known parameter" },
    ]);
    const b = await h.call("POST", "/auth/nonce", { body: { walletAddress: "x", extra: 1, env: { A: "b" } } });
    expect(b.status).toBe(400);
    expect(b.json.error.details.map((d: { field: string }) => d.field).sort()).toEqual(["env", "extra"]);
  });

  it("reads booleans from true, false, 1 and 0 only", async () => {
    for (const v of ["true", "false", "1", "0"]) {
      expect((await h.call("GET", `/nodes?hasGpu=${v}`)).status, v).toBe(200);
      expect((await h.call("GET", `/templates?requiresGpu=${v}`)).status, v).toBe(200);
    }
    const gpu = (await h.call("GET", "/templates?requiresGpu=1")).json.templates;
    expect(gpu.length).toBeGreaterThan(0);
    expect(gpu.every((t: { requiresGpu: boolean }) => t.requiresGpu)).toBe(true);
    for (const v of ["yes", "TRUE", "", "2", "on"]) {
      const r = await h.call("GET", `/nodes?hasGpu=${v}`);
      expect(r.status, v).toBe(400);
      expect(r.json.error.details.map((d: { field: string }) => d.field)).toEqual(["hasGpu"]);
    }
  });
});
