import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, newWallet, startHarness } from "../support/harness";

const run = promisify(execFile);

const root = path.resolve(import.meta.dirname, "../../../..");

describe("admin credit command", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "cm-admin-"));
  const url = `file:${path.join(dir, "marketplace.db")}`;
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ name: "sqlite", create: async () => ({ url, drop: async () => undefined }) });
  });
  afterAll(() => h.close());

  it("credits a wallet through the ledger, visible as an ordinary transaction", async () => {
    const w = newWallet();
    const { stdout } = await run("npx", ["tsx", "apps/control-plane/src/admin.ts", "credit", w.address, "2500", "trial"], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: url },
    });
    expect(stdout).toContain("credited 2500 credits");
    const s = await h.signIn(w);
    expect((await h.call("GET", "/credits/balance", { token: s.token })).json.balance).toEqual({ available: 2500, reserved: 0, totalUsed: 0 });
    const tx = (await h.call("GET", "/credits/transactions", { token: s.token })).json.transactions;
    expect(tx).toHaveLength(1);
    expect(tx[0]).toMatchObject({ type: "deposit", amount: 2500, description: "admin credit: trial" });
  });

  it("refuses bad input with a message and a non-zero exit, writing nothing", async () => {
    for (const args of [["credit", "not-a-wallet", "10"], ["credit", newWallet().address, "-5"], ["credit", newWallet().address, "1.5"], ["debit"]]) {
      const r = await run("npx", ["tsx", "apps/control-plane/src/admin.ts", ...args], { cwd: root, env: { ...process.env, DATABASE_URL: url } }).catch(
        (e) => e,
      );
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/wallet|credits must|usage/);
    }
  });

  it("is not reachable from the public API", async () => {
    const openapi = (await h.call("GET", "/openapi.json")).json;
    expect(Object.keys(openapi.paths).some((p) => p.includes("admin"))).toBe(false);
    expect((await h.call("POST", "/admin/credit", { body: {} })).status).toBe(404);
  });
});
