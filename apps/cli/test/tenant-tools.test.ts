import { spawn } from "node:child_process";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { sqliteDatabase } from "@cm/testkit";
import { Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness, TestClock } from "../../control-plane/test/support/harness";
import { ENTRY, ROOT, TSX, terminal } from "./support/cli";

// The small commands tenants asked for (issue 30), the real `cm` as a subprocess against a
// real control plane (SQLite, port 0) whose clock stands at the real time, as cli.test.ts.

let h: Harness;
beforeAll(async () => {
  h = await startHarness(sqliteDatabase, { overrides: { clock: new TestClock(Date.now()) } });
});
afterAll(() => h?.close());

const sessionFile = (home: string) => {
  const dir = join(home, ".config/cm/sessions");
  return join(dir, readdirSync(dir)[0]!);
};

describe("cm keygen", () => {
  it("writes a Solana CLI keypair, 0600, where cm login reads it, and cm login signs in with it", async () => {
    const t = terminal({ CM_API_URL: h.url });
    try {
      const made = await t.cm(["keygen"]);
      expect(made.code, made.stderr).toBe(0);
      const address = made.stdout.trim();
      const path = join(t.home, ".config/solana/id.json");
      expect(made.stderr).toContain(`Wrote a new keypair to ${path} (mode 0600)`);
      expect(statSync(path).mode & 0o777).toBe(0o600);
      const bytes = JSON.parse(readFileSync(path, "utf8")) as number[];
      expect(bytes).toHaveLength(64);
      // web3.js checks that the public key half is the seed's.
      expect(Keypair.fromSecretKey(Uint8Array.from(bytes)).publicKey.toBase58()).toBe(address);

      const login = await t.cm(["login"]);
      expect(login.code, login.stderr).toBe(0);
      expect(login.stderr).toContain(`as ${address}`);
      expect(JSON.parse((await t.cm(["whoami", "--json"])).stdout).user.walletAddress).toBe(address);
    } finally {
      t.close();
    }
  });

  it("never replaces a file that exists without --force, and with it writes a new key 0600", async () => {
    const t = terminal();
    try {
      const path = join(t.home, "tenant.json");
      writeFileSync(path, "precious", { mode: 0o644 });
      const refused = await t.cm(["keygen", "--outfile", path]);
      expect(refused).toMatchObject({ code: 1, stdout: "" });
      expect(refused.stderr).toMatch(/^error KEYPAIR_EXISTS: .*tenant\.json already exists: .*pass --force/);
      expect(readFileSync(path, "utf8")).toBe("precious");

      const forced = await t.cm(["keygen", "-o", path, "--force", "--json"]);
      expect(forced.code, forced.stderr).toBe(0);
      const { publicKey } = JSON.parse(forced.stdout);
      expect(Keypair.fromSecretKey(Uint8Array.from(JSON.parse(readFileSync(path, "utf8")))).publicKey.toBase58()).toBe(publicKey);
      expect(statSync(path).mode & 0o777).toBe(0o600);
      expect(readdirSync(t.home)).not.toContainEqual(expect.stringMatching(/\.tmp$/));

      // --keypair (or CM_KEYPAIR) names the file login reads, and so the one keygen writes by default.
      const other = join(t.home, "keys/other.json");
      expect((await t.cm(["keygen"], { CM_KEYPAIR: other })).code).toBe(0);
      expect(statSync(other).mode & 0o777).toBe(0o600);
    } finally {
      t.close();
    }
  });
});

describe("cm token", () => {
  it("prints the access token alone, refreshed first once expired, and it authenticates GET /auth/me", async () => {
    const t = terminal({ CM_API_URL: h.url });
    try {
      expect((await t.cm(["token"])).stderr).toMatch(/^error NOT_SIGNED_IN: /);
      t.keypair();
      expect((await t.cm(["login"])).code).toBe(0);
      const printed = await t.cm(["token"]);
      expect(printed).toMatchObject({ code: 0, stderr: "" });
      expect(printed.stdout).toMatch(/^\S+\n$/);
      const me = await h.call("GET", "/auth/me", { token: printed.stdout.trim() });
      expect(me.status).toBe(200);

      // Expired by the session file's account: cm refreshes it, as every command does, and prints the new one.
      const file = sessionFile(t.home);
      const session = JSON.parse(readFileSync(file, "utf8"));
      writeFileSync(file, JSON.stringify({ ...session, expiresAt: 0 }));
      const renewed = await t.cm(["token"]);
      expect(renewed.code, renewed.stderr).toBe(0);
      const token = renewed.stdout.trim();
      expect(token).not.toBe(session.accessToken);
      expect(JSON.parse(readFileSync(file, "utf8")).accessToken).toBe(token);
      const again = await h.call("GET", "/auth/me", { token });
      expect(again.status).toBe(200);
      expect(again.json.user.id).toBe(me.json.user.id);
    } finally {
      t.close();
    }
  });
});

describe("INSUFFICIENT_CREDITS", () => {
  it("says how many credits the deployment needs, how many are available, and how to add them", async () => {
    const t = terminal({ CM_API_URL: h.url });
    try {
      t.keypair();
      await t.cm(["login"]);
      const nodeId = (await h.onlineNode((await h.signIn()).token, { hourlyRateCents: 50 })).id;
      const r = await t.cm(["deploy", "--image", "busybox:1.36", "--node", nodeId]);
      expect(r).toMatchObject({
        code: 1,
        stdout: "",
        stderr:
          "error INSUFFICIENT_CREDITS: this deployment holds one hour of its rate, 50 credits, while it runs, and 0 credits are available: add credits with `cm credits buy PACKAGE_ID` (`cm credits packages` lists them) or POST /credits/deposit/initiate\n",
      });
    } finally {
      t.close();
    }
  });
});

describe("cm logs --timestamps", () => {
  let t: ReturnType<typeof terminal>;
  let id: string;
  let seq = 0;
  beforeAll(async () => {
    t = terminal({ CM_API_URL: h.url });
    t.keypair();
    await t.cm(["login"]);
    const userId = JSON.parse((await t.cm(["whoami", "--json"])).stdout).user.id;
    await h.grantCredits(userId, 1_000);
    const nodeId = (await h.onlineNode((await h.signIn()).token)).id;
    id = (await t.cm(["deploy", "--image", "busybox:1.36", "--node", nodeId])).stdout.trim();
  });
  afterAll(() => t?.close());

  // Stored as the agent's lines are, with Docker's RFC 3339 nanosecond stamps.
  const add = (ts: string, stream: "stdout" | "stderr", message: string) =>
    h.deps.repos.logIngest.append(id, [{ seq: ++seq, ts, tsMs: Date.parse(ts), stream, message }]);

  it("begins each line with its RFC 3339 time, as docker logs -t; without -t the lines are as they were", async () => {
    await add("2026-11-26T10:00:00.123456789Z", "stdout", "hello");
    await add("2026-11-26T10:00:01.000000001Z", "stderr", "warning: x");
    const stamped = await t.cm(["logs", id, "-t"]);
    expect(stamped).toMatchObject({ code: 0, stdout: "2026-11-26T10:00:00.123456789Z hello\n", stderr: "2026-11-26T10:00:01.000000001Z warning: x\n" });
    expect(await t.cm(["logs", id, "--timestamps"])).toMatchObject({ stdout: "2026-11-26T10:00:00.123456789Z hello\n" });
    expect(await t.cm(["logs", id])).toMatchObject({ code: 0, stdout: "hello\n", stderr: "warning: x\n" });
  });

  it("stamps the lines it follows with -f, until the deployment stops", async () => {
    const child = spawn(TSX, [ENTRY, "logs", id, "-ft", "--tail", "2"], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: t.home, XDG_CONFIG_HOME: join(t.home, ".config"), CM_API_URL: h.url },
    });
    let stdout = "";
    child.stdout.on("data", (d) => {
      stdout += String(d);
    });
    const exited = new Promise<number | null>((done) => child.on("exit", (c) => done(c)));
    try {
      await until(() => stdout.includes("hello"));
      await add("2026-11-26T10:00:02.5Z", "stdout", "followed");
      await until(() => stdout.includes("followed"));
      expect((await t.cm(["stop", id])).code).toBe(0);
      expect(await exited).toBe(0);
      expect(stdout).toBe("2026-11-26T10:00:00.123456789Z hello\n2026-11-26T10:00:02.5Z followed\n");
    } finally {
      child.kill();
    }
  });
});

async function until(ok: () => boolean, ms = 30_000) {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 50));
  }
}
