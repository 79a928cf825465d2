import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { readReleases, thisBuild } from "@cm/db";
import { REPO_ROOT } from "../../faults/support/processes";

const run = promisify(execFile);
const git = async (...args: string[]) => (await run("git", args, { cwd: REPO_ROOT, maxBuffer: 64 << 20 })).stdout.trim();

export type PreviousRelease = { version: string; commit: string; lastMigration: string; root: string; remove(): void };

/**
 * The release before the code under test, as its source: the newest release in
 * migrations/releases.json other than this commit, found as the commit that added its
 * line (git log -S), unpacked into a temporary directory with this checkout's
 * node_modules linked in, except its own workspaces (@cm/*), which are linked to
 * the unpacked ones. Its dependencies are this checkout's: a release that changed
 * them is run with the newer ones.
 */
export async function unpackPreviousRelease(): Promise<PreviousRelease> {
  const head = await git("rev-parse", "HEAD");
  const file = "packages/db/migrations/releases.json";
  let found: { version: string; lastMigration: string; commit: string } | undefined;
  for (const r of [...readReleases()].reverse()) {
    const commits = (await git("log", "--reverse", "--format=%H", `-S"version": "${r.version}"`, "--", file)).split("\n").filter(Boolean);
    if (commits.length === 0)
      throw new Error(`no commit adds release ${r.version}'s line to ${file}: a clone without that history (CI must clone with full history, fetch-depth 0)`);
    if (commits[0] !== head) {
      found = { ...r, commit: commits[0]! };
      break;
    }
  }
  if (!found) throw new Error(`${file} lists no release before this commit`);
  const root = fs.mkdtempSync(path.join(os.tmpdir(), `cm-release-${found.version}-`));
  await run("sh", ["-c", `git archive ${found.commit} apps packages package.json tsconfig.json | tar -x -C "${root}"`], { cwd: REPO_ROOT });
  const modules = path.join(root, "node_modules");
  fs.mkdirSync(path.join(modules, "@cm"), { recursive: true });
  for (const name of fs.readdirSync(path.join(REPO_ROOT, "node_modules")))
    if (name !== "@cm") fs.symlinkSync(path.join(REPO_ROOT, "node_modules", name), path.join(modules, name));
  for (const group of ["apps", "packages"])
    for (const dir of fs.readdirSync(path.join(root, group))) {
      const manifest = path.join(root, group, dir, "package.json");
      if (!fs.existsSync(manifest)) continue;
      const name = (JSON.parse(fs.readFileSync(manifest, "utf8")) as { name: string }).name;
      if (name.startsWith("@cm/")) fs.symlinkSync(path.join(root, group, dir), path.join(modules, name));
    }
  // Its own database code, not this checkout's (whose workspace links are relative to this root).
  if (!fs.realpathSync(path.join(modules, "@cm/db")).startsWith(fs.realpathSync(root))) throw new Error(`${root}'s @cm/db is not its own`);
  return { ...found, root, remove: () => fs.rmSync(root, { recursive: true, force: true }) };
}

/** Whether this build has migrations the release `lastMigration` lacks, on `dialect`: its database is then one release ahead. */
export const aheadOf = (lastMigration: string, dialect: "sqlite" | "pg") => thisBuild(dialect).newest.tag !== lastMigration;
