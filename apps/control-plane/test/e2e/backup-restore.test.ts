import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { openRepos } from "@cm/db";
import { createPgDatabase } from "@cm/db/testing";
import { needs } from "@cm/testkit";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { type AgentHarness, startAgentHarness } from "../agents/support/agent-harness";
import { freePort } from "../faults/support/pg-cluster";
import { type Program, REPO_ROOT, startProgram } from "../faults/support/processes";
import { checkWholeBooks } from "../support/books";
import { newWallet } from "../support/harness";
import { PAYOUT_TEST_RATE } from "../support/payouts";

// `cm-admin backup` and `cm-admin restore` (issue 40, item 4) as an administrator runs
// them: separate processes beside a control plane that is writing, on real files.

const execFileAsync = promisify(execFile);
const tsx = path.join(REPO_ROOT, "node_modules/.bin/tsx");

/** cm-admin from the checkout, run from elsewhere with `env`; answers its exit code and output, never throws. */
async function admin(args: string[], env: Record<string, string>) {
  try {
    const r = await execFileAsync(tsx, [path.join(REPO_ROOT, "apps/control-plane/src/admin.ts"), ...args], {
      cwd: os.tmpdir(),
      env: { ...process.env, ...env },
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? 1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

const work = mkdtempSync(path.join(os.tmpdir(), "cm-backup-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("cm-admin backup beside a control plane under write load", () => {
  let h: AgentHarness | undefined;
  afterAll(() => h?.close());

  it("takes copies that open and pass the ledger checks, each a different moment of the books", async () => {
    const file = path.join(work, "load/marketplace.db");
    const url = `file:${file}`;
    h = await startAgentHarness({ name: "sqlite", create: async () => ({ url, drop: async () => undefined }) });
    const harness = h;
    const op = await harness.signIn();
    const tenant = await harness.signIn();
    await harness.grantCredits(tenant.user.id, 100_000);
    const node = await harness.connectedNode(op.token, { hourlyRateCents: PAYOUT_TEST_RATE, maxDeployments: 8 });
    const d = await harness.deploy(tenant.token, node.id, node.agent);
    await harness.run(node.agent, d.spec, tenant.token);
    await harness.meterMinutes(node.agent, node.id, 1);

    // Deposits and charges, one after another as fast as the control plane takes them, until the backups are done.
    let writing = true;
    let rounds = 0;
    const load = (async () => {
      while (writing) {
        await harness.grantCredits(tenant.user.id, 100);
        await harness.meterMinutes(node.agent, node.id, 1);
        rounds++;
      }
    })();
    const backups: string[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const dest = path.join(work, `load-backup-${i}.db`);
        const r = await admin(["backup", dest], { DATABASE_URL: url });
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toMatch(new RegExp(`^backed up ${file} to ${dest} \\(\\d+ kB, \\d+ migrations, the last of `));
        expect(r.stdout).toContain(`cm-admin restore ${dest}`);
        // Readable by its owner alone: it holds every account.
        expect(statSync(dest).mode & 0o777).toBe(0o600);
        backups.push(dest);
      }
      // Its default name: beside the database, with the time.
      const r = await admin(["backup"], { DATABASE_URL: url });
      expect(r.code, r.stderr).toBe(0);
      const named = readdirSync(path.dirname(file)).filter((f) => /^marketplace-backup-\d{8}T\d{6}Z\.db$/.test(f));
      expect(named).toHaveLength(1);
      expect(r.stdout).toContain(`to ${path.join(path.dirname(file), named[0]!)} (`);
      backups.push(path.join(path.dirname(file), named[0]!));
    } finally {
      writing = false;
      await load;
    }
    expect(rounds, "rounds of a deposit and a metered minute while the backups ran").toBeGreaterThan(10);

    const usage: number[] = [];
    for (const backup of backups) {
      // Nothing beside it: it is one file, whoever reads it.
      for (const side of ["-wal", "-shm"]) expect(existsSync(backup + side), backup + side).toBe(false);
      const repos = await openRepos(`file:${backup}`);
      try {
        const totals = await checkWholeBooks(repos);
        const bal = await repos.ledger.balance(tenant.user.id);
        expect(bal.balanceMicro).toBe(await repos.ledger.sumOfRows(tenant.user.id));
        const { rows } = await repos.deployments.list({ userId: tenant.user.id, page: 1, limit: 100 });
        expect(bal.reservedMicro).toBe(rows.reduce((s, dep) => s + dep.reservedMicro, 0));
        usage.push(totals.usageMicro);
      } finally {
        await repos.handle.close();
      }
    }
    expect(usage[0]).toBeGreaterThan(0);
    // Taken while charges went on: each later copy holds more of them.
    for (let i = 1; i < usage.length; i++) expect(usage[i]).toBeGreaterThan(usage[i - 1]!);
    await harness.checkBooks(tenant.user.id);
  }, 120_000);
});

describe("cm-admin restore", () => {
  const file = path.join(work, "restore/marketplace.db");
  const url = `file:${file}`;
  let cp: Program | undefined;
  afterAll(() => cp?.stop());

  async function startControlPlane() {
    const port = await freePort();
    const p = startProgram("control-plane", "apps/control-plane/src/index.ts", [], {
      DATABASE_URL: url,
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "info",
      PAYOUT_KEYPAIR: "",
    });
    await p.waitForLine(/control plane listening/, 60_000);
    return { p, url: `http://127.0.0.1:${port}` };
  }

  async function balance(apiUrl: string, wallet = newWallet()) {
    const n = await (
      await fetch(`${apiUrl}/auth/nonce`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ walletAddress: wallet.address }),
      })
    ).json();
    const v = await (
      await fetch(`${apiUrl}/auth/verify`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ walletAddress: wallet.address, message: n.message, signature: wallet.sign(n.message) }),
      })
    ).json();
    const b = await (await fetch(`${apiUrl}/credits/balance`, { headers: { authorization: `Bearer ${v.accessToken}` } })).json();
    return b.balance.available as number;
  }

  it("refuses while the control plane runs; stopped, puts the backup in place, keeps the replaced one aside, and the control plane starts on it", async () => {
    let started = await startControlPlane();
    cp = started.p;
    const before = newWallet();
    const after = newWallet();
    expect((await admin(["credit", before.address, "500"], { DATABASE_URL: url })).code).toBe(0);
    const backup = path.join(work, "restore-backup.db");
    expect((await admin(["backup", backup], { DATABASE_URL: url })).code).toBe(0);
    expect((await admin(["credit", after.address, "700"], { DATABASE_URL: url })).code).toBe(0);

    const refused = await admin(["restore", backup], { DATABASE_URL: url });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`a control plane is running on ${file} (it holds ${file}.lock): stop it`);
    expect(refused.stderr).toContain("nothing was changed");
    expect(readdirSync(path.dirname(file)).filter((f) => f.includes("replaced"))).toEqual([]);
    expect(await balance(started.url, after)).toBe(700);

    await cp.stop();
    const restored = await admin(["restore", backup], { DATABASE_URL: url });
    expect(restored.code, restored.stderr).toBe(0);
    const aside = /the database it replaced is kept at (\S+)/.exec(restored.stdout)?.[1];
    expect(restored.stdout).toContain(`restored ${backup} into ${file} (`);
    expect(aside).toMatch(new RegExp(`^${path.dirname(file)}/marketplace-replaced-\\d{8}T\\d{6}Z\\.db$`));
    // The one replaced is whole on its own (its WAL folded in), with the credit made after the backup.
    expect(existsSync(`${aside}-wal`)).toBe(false);
    const old = new Database(aside!, { readonly: true });
    expect(old.prepare("select count(*) as n from users where wallet_address = ?").get(after.address)).toEqual({ n: 1 });
    old.close();

    started = await startControlPlane();
    cp = started.p;
    expect(await balance(started.url, before)).toBe(500);
    // The credit made after the backup is not in it.
    expect(await balance(started.url, after)).toBe(0);
  }, 120_000);

  it("refuses a file that is not one of the control plane's databases, changing nothing", async () => {
    const text = path.join(work, "not-a-database.db");
    writeFileSync(text, "hello\n".repeat(200));
    const other = path.join(work, "other-program.db");
    const db = new Database(other);
    db.exec("create table notes (body text)");
    db.close();
    const unknown = path.join(work, "missing.db");
    for (const [from, why] of [
      [text, "cannot be"],
      [other, "it has no migrations table"],
      [unknown, "does not exist"],
    ] as const) {
      const r = await admin(["restore", from], { DATABASE_URL: url });
      expect(r.code, from).toBe(1);
      expect(r.stderr).toContain(from);
      expect(r.stderr).toContain(why);
      expect(r.stderr).toContain("nothing was restored");
    }
  });
});

describe("cm-admin backup on PostgreSQL", () => {
  it("writes nothing and prints the pg_dump line, with the URL's parts and never its password", async () => {
    const r = await admin(["backup", "cm.dump"], { DATABASE_URL: "postgres://cm:s3cr%3Bet@db.example:6432/market?sslmode=require" });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe("pg_dump --host=db.example --port=6432 --username=cm --dbname='dbname=market sslmode=require' --format=custom --file=cm.dump\n");
    expect(r.stdout + r.stderr).not.toContain("s3cr");
    expect(r.stderr).toContain("postgres://cm:***@db.example:6432/market?sslmode=require is PostgreSQL: cm-admin writes nothing");
    expect(r.stderr).toContain("pg_restore --host=db.example");
    expect(existsSync(path.join(os.tmpdir(), "cm.dump"))).toBe(false);
  });

  needs("postgres").it("whose line, run as printed, dumps the database", async () => {
    const db = await createPgDatabase();
    try {
      // Migrated by the control plane's own code, so there is something to dump.
      await (await openRepos(db.url)).handle.close();
      const dump = path.join(work, "pg.dump");
      const r = await admin(["backup", dump], { DATABASE_URL: db.url });
      expect(r.code, r.stderr).toBe(0);
      const password = decodeURIComponent(new URL(db.url).password);
      await execFileAsync("sh", ["-c", r.stdout], { env: { ...process.env, PGPASSWORD: password } });
      const listed = await execFileAsync("pg_restore", ["--list", dump]);
      expect(listed.stdout).toContain("__drizzle_migrations");
    } finally {
      await db.drop();
    }
  });
});
