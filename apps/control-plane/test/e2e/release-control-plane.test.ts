import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { arch as hostArch, tmpdir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { databaseInUse } from "@cm/db";
import { createPgDatabase } from "@cm/db/testing";
import { needs } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appVersion } from "../../../../scripts/build";
import { betterSqliteAddon, TRIPLETS } from "../../../../scripts/release/native-addon";
import {
  type Arch,
  CACHE_DIR,
  elfArch,
  installScript,
  NODE_VERSION,
  nodeRuntimePackage,
  releaseCli,
  releaseControlPlane,
} from "../../../../scripts/release/release";
import { freePort } from "../faults/support/pg-cluster";
import { newWallet } from "../support/harness";
import { linkTools } from "./support/clean-machine";
import { notPackedForRoot, tarEntries, writableByOthers } from "./support/file-modes";
import { until } from "./support/system";

// The control plane's release as an administrator gets it (issue 28): the tarball unpacked
// on a machine with no checkout, no node_modules and no node on its PATH, run by its own
// wrapper on the embedded database and on PostgreSQL; the released `cm` talks to it.

const ARCH: Arch = hostArch() === "arm64" ? "arm64" : "x64";
const OTHER: Arch = ARCH === "x64" ? "arm64" : "x64";
/** Where the release finds (or builds) an architecture's better-sqlite3 addon. */
const addonSource = (arch: Arch) => ({
  root: fileURLToPath(new URL("../../../..", import.meta.url)),
  cacheDir: CACHE_DIR,
  nodePackage: () => nodeRuntimePackage(arch),
  nodeVersion: NODE_VERSION,
  elfArch,
});

describe("the control plane's release tarball, unpacked on a clean machine", () => {
  let work = "";
  let bin = "";
  let home = "";
  let dir = "";
  let cm = "";
  let made: string[] = [];
  let skipped: string[] = [];
  const version = `${appVersion("control-plane")}+test.1`;
  const running: ChildProcess[] = [];

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "cm-cp-release-"));
    bin = join(work, "bin");
    home = join(work, "state");
    mkdirSync(bin);
    mkdirSync(home);
    linkTools(bin);
    const out = join(work, "release");
    // Built under umask 000, as a build machine with a careless umask builds it (issue 36): what it
    // packs must not depend on it. The caches in dist/ are filled first, under the usual umask, so
    // that no later release takes a runtime or an addon this one left world-writable.
    for (const arch of [ARCH, OTHER]) {
      await nodeRuntimePackage(arch);
      await betterSqliteAddon(arch, addonSource(arch));
    }
    const umask = process.umask(0);
    try {
      ({ made, skipped } = await releaseControlPlane({ arches: [ARCH, OTHER], outDir: out, version, gzipLevel: 1 }));
      cm = await releaseCli({ outDir: out });
    } finally {
      process.umask(umask);
    }
    if (made.length > 0) await runProgram("tar", ["-xzf", made[0]!, "-C", work], { env: { PATH: bin } });
    dir = join(work, `cm-control-plane-${version}-linux-${ARCH}`);
  }, 360_000);

  afterAll(() => {
    for (const p of running) p.kill("SIGTERM");
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /** install-cm-control-plane.sh from `dir` into `root` with the plain PATH, under `umask` where given. */
  const installInto = (root: string, args: string[], dir = join(work, "release"), umask?: string) => {
    const script = join(dir, "install-cm-control-plane.sh");
    const command = umask === undefined ? ["bash", script, ...args] : ["sh", "-c", `umask ${umask}; exec bash "$@"`, "sh", script, ...args];
    return new Promise<{ code: number; out: string }>((resolve) =>
      execFile(command[0]!, command.slice(1), { env: { PATH: bin, CM_ROOT: root } }, (error, stdout, stderr) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, out: stdout + stderr }),
      ),
    );
  };

  /** bin/cm-control-plane (or `program`) with the plain PATH and `env`; resolves once /health answers. */
  async function start(
    env: Record<string, string>,
    program: [string, string[]] = [join(dir, "bin/cm-control-plane"), []],
  ): Promise<{ url: string; output: () => string }> {
    const port = await freePort();
    let output = "";
    const child = spawn(program[0], program[1], { cwd: work, env: { PATH: bin, HOME: work, PORT: String(port), ...env } });
    running.push(child);
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    const url = `http://127.0.0.1:${port}`;
    await until(
      "the released control plane's /health",
      async () => {
        if (child.exitCode !== null) throw new Error(`the control plane exited ${child.exitCode}:\n${output}`);
        return (await fetch(`${url}/health`).catch(() => undefined))?.ok === true;
      },
      60_000,
      async () => output,
    );
    return { url, output: () => output };
  }

  it("holds this machine's build, and SHA256SUMS covers it", async () => {
    expect(made.map((f) => f.split("/").pop())).toContain(`cm-control-plane-${version}-linux-${ARCH}.tar.gz`);
    const sums = await runProgram("sha256sum", ["-c", "SHA256SUMS"], { cwd: join(work, "release") });
    expect(sums).toContain(`cm-control-plane-${version}-linux-${ARCH}.tar.gz: OK`);
    for (const file of [
      "bin/cm-control-plane",
      "bin/cm-admin",
      "node/bin/node",
      "lib/control-plane.mjs",
      "lib/admin.mjs",
      "cm-control-plane.service",
      "control-plane.env",
    ])
      expect(existsSync(join(dir, file)), file).toBe(true);
    expect(elfArch(join(dir, "node_modules/better-sqlite3/build/Release/better_sqlite3.node"))).toBe(ARCH);
    expect(readFileSync(join(dir, "VERSION"), "utf8").trim()).toBe(version);
    // The machine it runs on has no node: the wrapper runs the one shipped.
    expect(execFileSync("sh", ["-c", "command -v node || echo none"], { encoding: "utf8", env: { PATH: bin } }).trim()).toBe("none");
  });

  it("runs on the embedded database under CM_HOME, serves its API and docs, and the released cm reads it", async () => {
    const cp = await start({ CM_HOME: home });
    expect(statSync(join(home, "data/marketplace.db")).isFile()).toBe(true);
    const docs = await fetch(`${cp.url}/docs/swagger-ui-bundle.js`);
    expect(docs.status).toBe(200);
    const spec = (await (await fetch(`${cp.url}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(spec.paths)).toContain("/nodes");
    // The web console it carries, under /app/ with its assets: found in console/ beside lib/ (routes/console.ts).
    const app = await fetch(`${cp.url}/app/`, { headers: { accept: "text/html" } });
    const html = await app.text();
    expect(app.status).toBe(200);
    expect(html).toContain('<div id="root">');
    const script = /src="(\/app\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect((await fetch(`${cp.url}${script}`)).headers.get("content-type")).toMatch(/^text\/javascript/);
    // No native-addon fallback warnings: what ships is what runs.
    expect(cp.output()).not.toMatch(/Failed to load bindings/);
    // cm as a tenant gets it, run by the tarball's Node (any Node 20.19+ would do).
    const nodes = await runProgram(join(dir, "node/bin/node"), [cm, "nodes", "--json"], {
      env: { PATH: bin, HOME: work, CM_API_URL: cp.url },
    });
    expect(JSON.parse(nodes)).toMatchObject({ nodes: [] });
    // The administrator's tools read the same database, from the env file the unit reads.
    const envFile = join(work, "control-plane.env");
    execFileSync("sh", ["-c", `printf 'CM_HOME=%s\\n' '${home}' > '${envFile}'`], { env: { PATH: bin } });
    const admin = await runProgram(join(dir, "bin/cm-admin"), ["payouts", "list"], {
      env: { PATH: bin, CM_CONTROL_PLANE_ENV: envFile },
    });
    expect(admin).toContain(join(home, "data/marketplace.db"));
  }, 120_000);

  it("packs every entry of every tarball as root's, writable by root alone, though built under umask 000", () => {
    const tarballs = made.filter((f) => f.endsWith(".tar.gz"));
    expect(tarballs.length).toBeGreaterThan(0);
    for (const tarball of tarballs) {
      expect(notPackedForRoot(tarball), tarball).toEqual([]);
      // What runs stays executable; what is read is not.
      const name = basename(tarball, ".tar.gz");
      const modes = new Map(tarEntries(tarball).map((e) => [e.name, e.mode]));
      for (const file of ["bin/cm-control-plane", "bin/cm-admin", "node/bin/node", "install.sh"]) expect(modes.get(`${name}/${file}`), file).toBe(0o755);
      for (const file of ["README.md", "VERSION", "control-plane.env"]) expect(modes.get(`${name}/${file}`), file).toBe(0o644);
    }
  });

  it("names what the other architecture's build needs where this machine cannot cross-compile it", async () => {
    const noCompiler = mkdtempSync(join(tmpdir(), "cm-no-cache-"));
    try {
      const addon = await betterSqliteAddon(OTHER, { ...addonSource(OTHER), cacheDir: noCompiler, searchPath: bin });
      expect(addon).toEqual({
        skipped: expect.stringMatching(
          new RegExp(`^cm-control-plane for linux-${OTHER}: better-sqlite3 here is built for ${ARCH} and no ${TRIPLETS[OTHER]}-g\\+\\+ is installed`),
        ),
      });
    } finally {
      rmSync(noCompiler, { recursive: true, force: true });
    }
  });

  // Release machines here are x86-64; the arm64 tarball's addon is cross-compiled, and the
  // tarball run as an arm64 machine would run it, under qemu (its glibc from the cross toolchain).
  (ARCH === "x64" ? needs("cross-arm64", "qemu-aarch64") : { it: it.skip }).it(
    "holds an arm64 build whose cross-compiled better-sqlite3 serves the embedded database under qemu",
    async () => {
      const armTarball = made.find((f) => f.endsWith(`-linux-arm64.tar.gz`));
      expect(armTarball, skipped.join("\n")).toBeDefined();
      expect(await runProgram("sha256sum", ["-c", "SHA256SUMS"], { cwd: join(work, "release") })).toContain(
        `cm-control-plane-${version}-linux-arm64.tar.gz: OK`,
      );
      const arm = join(work, "arm64");
      mkdirSync(arm);
      await runProgram("tar", ["-xzf", armTarball!, "-C", arm], { env: { PATH: bin } });
      const armDir = join(arm, `cm-control-plane-${version}-linux-arm64`);
      expect(readFileSync(join(armDir, "ARCH"), "utf8").trim()).toBe("arm64");
      expect(elfArch(join(armDir, "node/bin/node"))).toBe("arm64");
      expect(elfArch(join(armDir, "node_modules/better-sqlite3/build/Release/better_sqlite3.node"))).toBe("arm64");
      const armHome = join(arm, "state");
      const cp = await start({ CM_HOME: armHome }, [
        "/usr/bin/qemu-aarch64-static",
        ["-L", "/usr/aarch64-linux-gnu", join(armDir, "node/bin/node"), join(armDir, "lib/control-plane.mjs")],
      ]);
      expect(statSync(join(armHome, "data/marketplace.db")).isFile()).toBe(true);
      expect(await (await fetch(`${cp.url}/nodes`)).json()).toMatchObject({ nodes: [] });
      expect(cp.output()).toContain('"database":"sqlite"');
      expect(cp.output()).not.toMatch(/Failed to load bindings/);
    },
    120_000,
  );

  needs("systemd-analyze").it("systemd accepts the unit, run from the unpacked release", async () => {
    // ExecStart pointed at this unpacking (systemd checks that it is executable); the
    // trailing ":" keeps systemd's own directories (network-online.target and the rest).
    const units = join(work, "units");
    mkdirSync(units, { recursive: true });
    const unit = readFileSync(join(dir, "cm-control-plane.service"), "utf8");
    expect(unit).toContain("ExecStart=/opt/cm-control-plane/current/bin/cm-control-plane");
    writeFileSync(join(units, "cm-control-plane.service"), unit.replace("ExecStart=/opt/cm-control-plane/current/", `ExecStart=${dir}/`));
    await runProgram("systemd-analyze", ["verify", join(units, "cm-control-plane.service")], { env: { ...process.env, SYSTEMD_UNIT_PATH: `${units}:` } });
  });

  it("installs with install-cm-control-plane.sh into a clean root, runs from there, keeps its settings, and uninstalls", async () => {
    const root = join(work, "root");
    mkdirSync(root);
    const release = join(work, "release");
    const install = (args: string[], dir = release) => installInto(root, args, dir);
    const opt = join(root, "opt/cm-control-plane");
    const envFile = join(root, "etc/cm-control-plane/control-plane.env");

    // A download that does not match SHA256SUMS is refused, and nothing is changed.
    const damaged = join(work, "damaged");
    mkdirSync(damaged);
    for (const f of ["install-cm-control-plane.sh", "SHA256SUMS", `cm-control-plane-${version}-linux-${ARCH}.tar.gz`])
      copyFileSync(join(release, f), join(damaged, f));
    writeFileSync(join(damaged, `cm-control-plane-${version}-linux-${ARCH}.tar.gz`), "not the release");
    const refused = await install([], damaged);
    expect(refused.code).toBe(1);
    expect(refused.out).toContain(`cm-control-plane-${version}-linux-${ARCH}.tar.gz does not match SHA256SUMS`);
    expect(existsSync(opt)).toBe(false);
    // A dry run says what it would do and does nothing.
    const dry = await install(["--dry-run"]);
    expect(dry.code, dry.out).toBe(0);
    expect(dry.out).toContain(`would run: mv`);
    expect(existsSync(opt)).toBe(false);

    const urlFile = join(work, "database-url");
    // A password with ; and a query with & (the shell would run or background what follows them, unquoted).
    const databaseUrl = "postgres://cm:se;cret@127.0.0.1:5432/cm?sslmode=disable&application_name=cm";
    writeFileSync(urlFile, `${databaseUrl}\n`, { mode: 0o600 });
    const first = await install(["--database-url-file", urlFile]);
    expect(first.code, first.out).toBe(0);
    expect(first.out).toContain(`matches SHA256SUMS`);
    expect(readlinkSync(join(opt, "current"))).toBe(version);
    expect(statSync(envFile).mode & 0o777).toBe(0o640);
    const settings = readFileSync(envFile, "utf8");
    expect(settings).toContain("CM_HOME=/var/lib/cm-control-plane");
    // As cm-admin's wrapper reads it (the shell; systemd reads single quotes the same way).
    expect(execFileSync("sh", ["-c", `set -a; . '${envFile}'; printf %s "$DATABASE_URL"`], { encoding: "utf8", env: { PATH: bin } })).toBe(databaseUrl);
    expect(readFileSync(join(root, "etc/systemd/system/cm-control-plane.service"), "utf8")).toContain(
      "ExecStart=/opt/cm-control-plane/current/bin/cm-control-plane",
    );
    expect(readlinkSync(join(root, "usr/local/bin/cm-admin"))).toBe("/opt/cm-control-plane/current/bin/cm-admin");
    expect(existsSync(join(opt, "current/install.sh"))).toBe(true);

    // What was installed runs (on the embedded database here: the test root's own CM_HOME).
    const cp = await start({ CM_HOME: join(root, "var/lib/cm-control-plane") }, [join(opt, "current/bin/cm-control-plane"), []]);
    expect((await fetch(`${cp.url}/nodes`)).status).toBe(200);
    for (const p of running.splice(0)) p.kill("SIGTERM");

    // Installed again (an upgrade's path): the settings an administrator edited are kept; no earlier version to roll back to.
    writeFileSync(envFile, `${settings}PORT=9999\n`);
    const again = await install([]);
    expect(again.code, again.out).toBe(0);
    expect(again.out).toContain(`kept ${envFile}`);
    expect(readFileSync(envFile, "utf8")).toContain("PORT=9999");
    const rollback = await install(["--rollback"]);
    expect(rollback.code).toBe(1);
    expect(rollback.out).toContain(`there is no previous version in ${opt} to roll back to (current is ${version})`);

    const removed = await install(["--uninstall"]);
    expect(removed.code, removed.out).toBe(0);
    expect(existsSync(opt)).toBe(false);
    expect(existsSync(join(root, "etc/systemd/system/cm-control-plane.service"))).toBe(false);
    expect(existsSync(envFile)).toBe(true);
    expect(existsSync(join(root, "var/lib/cm-control-plane/data/marketplace.db"))).toBe(true);
    const purged = await install(["--uninstall", "--purge"]);
    expect(purged.code, purged.out).toBe(0);
    expect(existsSync(join(root, "etc/cm-control-plane"))).toBe(false);
    expect(existsSync(join(root, "var/lib/cm-control-plane"))).toBe(false);
  }, 120_000);

  it("installs a tarball whose every entry is 0777, under umask 000, leaving nothing its group or others may write", async () => {
    const name = `cm-control-plane-${version}-linux-${ARCH}`;
    const loose = join(work, "loose");
    const unpacked = join(work, "loose-unpacked");
    const root = join(work, "loose-root");
    for (const d of [loose, unpacked, root]) mkdirSync(d);
    await runProgram("tar", ["-xzf", join(work, "release", `${name}.tar.gz`), "-C", unpacked]);
    await runProgram("tar", ["-czf", join(loose, `${name}.tar.gz`), "--mode=a=rwx", "-C", unpacked, name]);
    expect(tarEntries(join(loose, `${name}.tar.gz`)).filter((e) => e.mode !== 0o777)).toEqual([]);
    copyFileSync(join(work, "release", "install-cm-control-plane.sh"), join(loose, "install-cm-control-plane.sh"));
    writeFileSync(join(loose, "SHA256SUMS"), await runProgram("sha256sum", [`${name}.tar.gz`], { cwd: loose }));

    const r = await installInto(root, [], loose, "000");
    expect(r.code, r.out).toBe(0);
    expect(writableByOthers(root)).toEqual([]);
    // Which files should run is not the installer's to know: a file the archive made executable stays so.
    const installed = join(root, "opt/cm-control-plane", version);
    expect(statSync(join(installed, "node/bin/node")).mode & 0o7777).toBe(0o755);
    expect(statSync(join(installed, "lib")).mode & 0o7777).toBe(0o755);
  }, 120_000);

  it("after a rollback, refuses a database a newer release migrated: exit 78, saying what to do", async () => {
    const rolledBack = join(work, "rolled-back");
    await start({ CM_HOME: rolledBack });
    for (const p of running.splice(0)) p.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 500));
    const sqlite = new Database(join(rolledBack, "data/marketplace.db"));
    sqlite.prepare("insert into __drizzle_migrations (hash, created_at) values ('newer', ?)").run(Date.parse("2099-01-01"));
    sqlite.close();
    const refused = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(join(dir, "bin/cm-control-plane"), [], { cwd: work, env: { PATH: bin, HOME: work, PORT: "0", CM_HOME: rolledBack } });
      let stderr = "";
      child.stderr.on("data", (d) => (stderr += d));
      child.on("exit", (code) => resolve({ code, stderr }));
    });
    expect(refused.code).toBe(78);
    expect(refused.stderr).toContain("the database was migrated by a newer release (its last migration is of 2099-01-01T00:00:00.000Z");
    expect(refused.stderr).toContain("restore the database from the backup taken before the upgrade");
  }, 120_000);

  /**
   * The release as version `next` with one migration more (a table, upgrade_probe), as a
   * newer release that migrates the database is: the tarball repacked, its installer
   * and SHA256SUMS beside it. Answers that directory.
   */
  async function newerRelease(next: string): Promise<string> {
    const out = join(work, `release-${next}`);
    const unpacked = join(work, `unpacked-${next}`);
    mkdirSync(out);
    mkdirSync(unpacked);
    await runProgram("tar", ["-xzf", join(work, "release", `cm-control-plane-${version}-linux-${ARCH}.tar.gz`), "-C", unpacked]);
    const name = `cm-control-plane-${next}-linux-${ARCH}`;
    renameSync(join(unpacked, `cm-control-plane-${version}-linux-${ARCH}`), join(unpacked, name));
    writeFileSync(join(unpacked, name, "VERSION"), `${next}\n`);
    writeFileSync(join(unpacked, name, "install.sh"), installScript("control-plane", next), { mode: 0o755 });
    const migrations = join(unpacked, name, "migrations/sqlite");
    const journalFile = join(migrations, "meta/_journal.json");
    const journal = JSON.parse(readFileSync(journalFile, "utf8")) as { entries: { idx: number; when: number; tag: string }[] };
    const last = journal.entries.at(-1)!;
    journal.entries.push({ ...last, idx: last.idx + 1, when: last.when + 60_000, tag: "9999_upgrade_probe" });
    writeFileSync(journalFile, JSON.stringify(journal, null, 2));
    writeFileSync(join(migrations, "9999_upgrade_probe.sql"), "CREATE TABLE `upgrade_probe` (`id` integer PRIMARY KEY NOT NULL);\n");
    await runProgram("tar", ["-czf", join(out, `${name}.tar.gz`), "--owner=root:0", "--group=root:0", "-C", unpacked, name]);
    writeFileSync(join(out, "install-cm-control-plane.sh"), installScript("control-plane", next), { mode: 0o755 });
    writeFileSync(join(out, "SHA256SUMS"), await runProgram("sha256sum", [`${name}.tar.gz`], { cwd: out }));
    return out;
  }

  it("backs the embedded database up before an upgrade, and a rollback past a migration restores it and starts", async () => {
    const root = join(work, "upgrade-root");
    mkdirSync(root);
    const stateDir = join(root, "var/lib/cm-control-plane");
    const db = join(stateDir, "data/marketplace.db");
    const opt = join(root, "opt/cm-control-plane");
    const next = `${appVersion("control-plane")}+test.2`;
    const newer = await newerRelease(next);
    // The installed cm-admin on this root's database (the env file's CM_HOME is the real machine's).
    const admin = (args: string[]) =>
      runProgram(join(opt, "current/bin/cm-admin"), args, { env: { PATH: bin, CM_CONTROL_PLANE_ENV: "/dev/null", CM_HOME: stateDir } });
    const runInstalled = async () => {
      await start({ CM_HOME: stateDir }, [join(opt, "current/bin/cm-control-plane"), []]);
    };
    const stopInstalled = async () => {
      for (const p of running.splice(0)) p.kill("SIGTERM");
      await until("the control plane to let go of its database", async () => !databaseInUse(db), 20_000);
    };
    const users = (wallet: string) => {
      const sqlite = new Database(db, { readonly: true });
      try {
        return (sqlite.prepare("select count(*) as n from users where wallet_address = ?").get(wallet) as { n: number }).n;
      } finally {
        sqlite.close();
      }
    };

    const first = await installInto(root, []);
    expect(first.code, first.out).toBe(0);
    await runInstalled();
    const before = newWallet().address;
    expect(await admin(["credit", before, "500"])).toContain("credited 500 credits");
    await stopInstalled();

    const upgrade = await installInto(root, [], newer);
    expect(upgrade.code, upgrade.out).toBe(0);
    const backup = /backed up \S+ to (\S+) \(/.exec(upgrade.out)?.[1];
    expect(backup, upgrade.out).toMatch(new RegExp(`^${stateDir}/data/marketplace-before-${next.replace("+", "\\+")}-\\d{8}T\\d{6}Z\\.db$`));
    expect(readFileSync(join(opt, next, "upgrade-backup"), "utf8").trim()).toBe(backup!.slice(root.length));
    await runInstalled();
    const after = newWallet().address;
    await admin(["credit", after, "700"]);
    await stopInstalled();
    const migrated = new Database(db, { readonly: true });
    expect(migrated.prepare("select name from sqlite_master where name = 'upgrade_probe'").get()).toBeDefined();
    migrated.close();

    const rollback = await installInto(root, ["--rollback"]);
    expect(rollback.code, rollback.out).toBe(0);
    expect(rollback.out).toContain(`the database was backed up before ${next} was installed: ${backup}`);
    expect(rollback.out).toContain(`${next} ran migrations ${version} lacks`);
    const aside = /the database it replaced is kept at (\S+)/.exec(rollback.out)?.[1];
    expect(aside, rollback.out).toMatch(new RegExp(`^${stateDir}/data/marketplace-replaced-`));
    expect(readlinkSync(join(opt, "current"))).toBe(version);
    // The older release starts on the restored database (it exited 78 on the migrated one): the credit before the upgrade is there, the one after is in the one set aside.
    await runInstalled();
    expect(users(before)).toBe(1);
    expect(users(after)).toBe(0);
    await stopInstalled();
    const kept = new Database(aside!, { readonly: true });
    expect(kept.prepare("select count(*) as n from users where wallet_address = ?").get(after)).toEqual({ n: 1 });
    kept.close();
  }, 180_000);

  needs("postgres").it(
    "runs on PostgreSQL given DATABASE_URL, migrating a new database",
    async () => {
      const db = await createPgDatabase();
      try {
        const cp = await start({ DATABASE_URL: db.url, CM_HOME: join(work, "unused") });
        const res = await fetch(`${cp.url}/nodes`);
        expect(res.status).toBe(200);
        expect(cp.output()).toContain('"database":"postgres"');
        expect(existsSync(join(work, "unused/data/marketplace.db"))).toBe(false);
      } finally {
        for (const p of running.splice(0)) p.kill("SIGTERM");
        await new Promise((r) => setTimeout(r, 500));
        await db.drop();
      }
    },
    120_000,
  );
});
