/**
 * better-sqlite3's native addon for a control-plane release of either architecture.
 *
 * This machine's own architecture takes the addon npm ci compiled. The other one is
 * compiled here by that architecture's cross compiler (Debian's g++-aarch64-linux-gnu, or
 * g++-x86-64-linux-gnu on an arm64 machine), against the headers of the very Node runtime
 * the tarball carries (the registry's node-linux-<arch> package holds include/node), with
 * npm's own node-gyp: better-sqlite3's prebuilt binaries are downloaded from GitHub, which
 * a build machine here cannot reach. Compiled once per better-sqlite3 and Node version and
 * kept in dist/.cache, as the runtimes are.
 */
import { accessSync, constants, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, renameSync, rmSync, statSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import path from "node:path";
import type { Arch } from "./release";
import { run } from "./run";

/** GNU's name for each architecture: its cross compilers are `<triplet>-gcc` and `<triplet>-g++`. */
export const TRIPLETS: Record<Arch, string> = { x64: "x86_64-linux-gnu", arm64: "aarch64-linux-gnu" };
const CROSS_PACKAGES: Record<Arch, string> = { x64: "g++-x86-64-linux-gnu", arm64: "g++-aarch64-linux-gnu" };

export interface AddonSource {
  /** the repository's root (node_modules/better-sqlite3 is read from it) */
  root: string;
  /** where compiled addons are kept between releases */
  cacheDir: string;
  /** the pinned Node runtime's package for the architecture (its include/node is compiled against) */
  nodePackage: () => Promise<string>;
  nodeVersion: string;
  /** the architecture of an ELF file */
  elfArch: (file: string) => Arch | "other";
  /** where the cross compiler is looked for (default: PATH) */
  searchPath?: string;
}

/** The addon's path for `arch`, or why there is none (the release then skips that tarball). */
export async function betterSqliteAddon(arch: Arch, source: AddonSource): Promise<{ file: string } | { skipped: string }> {
  const module = path.join(source.root, "node_modules/better-sqlite3");
  const own = path.join(module, "build/Release/better_sqlite3.node");
  const ownArch = existsSync(own) ? source.elfArch(own) : "other";
  // npm ci compiled it for the Node running here: the tarball's own Node must be the same major (the same ABI).
  const sameNode = process.versions.node.split(".")[0] === source.nodeVersion.split(".")[0];
  if (ownArch === arch && sameNode) return { file: own };
  const { version } = JSON.parse(readFileSync(path.join(module, "package.json"), "utf8")) as { version: string };
  const cached = path.join(source.cacheDir, `better_sqlite3-${version}-node${source.nodeVersion}-linux-${arch}.node`);
  if (existsSync(cached) && source.elfArch(cached) === arch) return { file: cached };
  const triplet = TRIPLETS[arch];
  const compiler = onPath(`${triplet}-g++`, source.searchPath);
  if (!compiler)
    return {
      skipped:
        `cm-control-plane for linux-${arch}: better-sqlite3 here is built for ${ownArch}${sameNode ? "" : ` on Node ${process.versions.node}`} and no ${triplet}-g++ is installed to ` +
        `cross-compile it (apt-get install ${CROSS_PACKAGES[arch]}), or release it on a linux-${arch} machine`,
    };
  const work = mkdtempSync(path.join(tmpdir(), `cm-addon-${arch}-`));
  try {
    const addon = path.join(work, "better-sqlite3");
    for (const part of ["package.json", "binding.gyp", "deps", "src"]) cpSync(path.join(module, part), path.join(addon, part), { recursive: true });
    await run("tar", ["-xzf", await source.nodePackage(), "-C", work, "package/include"]);
    // CC and CXX are the target's compilers in node-gyp's Makefiles; nothing here is built for the host.
    const env = { ...process.env, CC: `${triplet}-gcc`, CXX: `${triplet}-g++`, LINK: `${triplet}-g++`, AR: `${triplet}-ar` };
    try {
      await run(process.execPath, [nodeGyp(), "rebuild", `--arch=${arch}`, `--nodedir=${path.join(work, "package")}`, `--jobs=${cpus().length}`], {
        cwd: addon,
        env,
        stdout: "ignore",
        stderr: "keep",
      });
    } catch (error) {
      // node-gyp also needs python3 and make: say what it said, and let the release make the other tarballs.
      const said = ((error as { stderr?: string }).stderr || (error as Error).message).trim().split("\n").slice(-5).join("\n");
      return { skipped: `cm-control-plane for linux-${arch}: compiling better-sqlite3 with ${triplet}-g++ failed:\n${said}` };
    }
    const built = path.join(addon, "build/Release/better_sqlite3.node");
    if (source.elfArch(built) !== arch) throw new Error(`${triplet}-g++ built better-sqlite3 for ${source.elfArch(built)}, not ${arch}`);
    mkdirSync(source.cacheDir, { recursive: true });
    // Whole or not at all: a release interrupted mid-copy must not leave a cached half.
    const partial = `${cached}.${process.pid}.partial`;
    cpSync(built, partial);
    renameSync(partial, cached);
    return { file: cached };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** npm's own node-gyp (npm sets npm_config_node_gyp for its scripts; outside them, beside npm on PATH). */
function nodeGyp(): string {
  const given = process.env.npm_config_node_gyp;
  if (given && existsSync(given)) return given;
  const npm = onPath("npm");
  const beside = npm && path.join(path.dirname(realpathSync(npm)), "../node_modules/node-gyp/bin/node-gyp.js");
  if (beside && existsSync(beside)) return beside;
  throw new Error("node-gyp was not found: it comes with npm (npm's node_modules/node-gyp)");
}

function onPath(program: string, searchPath = process.env.PATH ?? ""): string | undefined {
  for (const dir of searchPath.split(":")) {
    const file = path.join(dir || ".", program);
    try {
      accessSync(file, constants.X_OK);
      if (statSync(file).isFile()) return file;
    } catch {}
  }
  return undefined;
}
