import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config";
import { type Harness, newWallet, startHarness } from "../support/harness";

const run = promisify(execFile);

const root = path.resolve(import.meta.dirname, "../../../..");
/** As an operator runs it from a directory of their own: tsx and the command by their paths, nothing resolved from the working directory. */
const admin = (args: string[], cwd: string, env: Record<string, string | undefined>) =>
  run(path.join(root, "node_modules", ".bin", "tsx"), [path.join(root, "apps/control-plane/src/admin.ts"), ...args], { cwd, env: { ...process.env, ...env } });

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

  it("run from another directory, credits the running control plane's database, reading a relative path from the repository root, and says which", async () => {
    const elsewhere = mkdtempSync(path.join(os.tmpdir(), "cm-admin-cwd-"));
    const w = newWallet();
    const file = path.join(dir, "marketplace.db");
    // The README's form, relative: before, it was read from the working directory, where a new empty database was made and credited.
    const { stdout } = await admin(["credit", w.address, "500"], elsewhere, { DATABASE_URL: `file:${path.relative(root, file)}` });
    expect(stdout).toContain(`credited 500 credits to ${w.address}`);
    const s = await h.signIn(w);
    expect((await h.call("GET", "/credits/balance", { token: s.token })).json.balance).toMatchObject({ available: 500 });
    expect(readdirSync(elsewhere)).toEqual([]);
    expect(stdout).toContain(`in ${file};`);
  });

  it("uses npm start's database by default, whichever directory it runs in", () => {
    expect(loadConfig({}).DATABASE_URL).toBe(`file:${path.join(root, "data", "marketplace.db")}`);
  });

  it("refuses a SQLite database that does not exist, saying where it looked, and makes none", async () => {
    const elsewhere = mkdtempSync(path.join(os.tmpdir(), "cm-admin-cwd-"));
    const missing = path.join(dir, "nobody-uses.db");
    for (const url of [`file:${missing}`, "file:./data/nobody-uses.db"]) {
      const r = await admin(["credit", newWallet().address, "500"], elsewhere, { DATABASE_URL: url }).catch((e) => e);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr).toContain(`no database at ${url === `file:${missing}` ? missing : path.join(root, "data", "nobody-uses.db")}; nothing was credited`);
    }
    expect(existsSync(missing)).toBe(false);
    expect(existsSync(path.join(root, "data", "nobody-uses.db"))).toBe(false);
    expect(readdirSync(elsewhere)).toEqual([]);
  });

  it("is not reachable from the public API", async () => {
    const openapi = (await h.call("GET", "/openapi.json")).json;
    expect(Object.keys(openapi.paths).some((p) => p.includes("admin"))).toBe(false);
    expect((await h.call("POST", "/admin/credit", { body: {} })).status).toBe(404);
  });
});
