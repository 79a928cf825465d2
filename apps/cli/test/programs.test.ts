import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { packCli } from "../../../scripts/release/pack";
import { ROOT, TSX } from "./support/cli";

// The three programs as installed (issue 39): each answers --version and version with its
// package's version, and its --help names it as installed (cm-agent, not npm run agent), exit 0.

const run = promisify(execFile);
const versionOf = (app: string) => (JSON.parse(readFileSync(path.join(ROOT, "apps", app, "package.json"), "utf8")) as { version: string }).version;

const PROGRAMS = [
  { name: "cm", entry: "apps/cli/src/index.ts", version: versionOf("cli"), usage: /^Usage: cm \[/m },
  { name: "cm-agent", entry: "apps/agent/src/index.ts", version: versionOf("agent"), usage: /^Usage: cm-agent \[command\]/m },
  { name: "cm-admin", entry: "apps/control-plane/src/admin.ts", version: versionOf("control-plane"), usage: /^usage: cm-admin credit /m },
];

const home = mkdtempSync(path.join(tmpdir(), "cm-programs-"));
afterAll(() => rmSync(home, { recursive: true, force: true }));
const env = { PATH: process.env.PATH ?? "", HOME: home, NO_COLOR: "1" };

describe.each(PROGRAMS)("$name", ({ entry, version, usage }) => {
  it("answers --version and version with its version, and --help naming itself, exit 0", async () => {
    // In parallel: each is a tsx start of its own (about a second).
    const [flag, word, help] = await Promise.all(["--version", "version", "--help"].map((arg) => run(TSX, [entry, arg], { cwd: ROOT, env })));
    expect(flag).toEqual({ stdout: `${version}\n`, stderr: "" });
    expect(word).toEqual({ stdout: `${version}\n`, stderr: "" });
    expect(help!.stderr).toBe("");
    expect(help!.stdout).toMatch(usage);
    // The contributors' way may follow, never lead.
    expect(help!.stdout.split("\n")[0]).not.toContain("npm run");
  });
});

describe("cm packed", () => {
  it("npm install -g of cm-<version>.tgz puts a cm on the PATH that runs on plain node", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "cm-global-"));
    try {
      const tarball = await packCli(path.join(dir, "packed"));
      expect(path.basename(tarball)).toBe(`cm-${versionOf("cli")}.tgz`);
      const prefix = path.join(dir, "global");
      await run("npm", ["install", "-g", "--prefix", prefix, "--offline", "--no-audit", "--no-fund", "--loglevel=error", tarball], {
        cwd: dir,
        env: { ...env },
      });
      const onPath = { ...env, PATH: `${path.join(prefix, "bin")}:${env.PATH}` };
      const { stdout: which } = await run("sh", ["-c", "command -v cm"], { env: onPath });
      expect(which.trim()).toBe(path.join(prefix, "bin", "cm"));
      expect((await run("cm", ["--version"], { env: onPath })).stdout).toBe(`${versionOf("cli")}\n`);
      expect((await run("cm", ["version"], { env: onPath })).stdout).toBe(`${versionOf("cli")}\n`);
      expect((await run("cm", ["nodes", "--help"], { env: onPath })).stdout).toContain("Usage: cm nodes");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
