/**
 * `npm run release [-- --arch x64|arm64] [--out DIR] [--version V]`: the release artefacts
 * in dist/release/ (issue 28, part 1):
 *   cm-agent-<version>-linux-<arch>.tar.gz  the bundle, a pinned Node runtime, the unit, install.sh
 *   install-cm-agent.sh                     the same install.sh, to download beside the tarball
 *   cm-control-plane-<version>-linux-<arch>.tar.gz
 *                                           the control plane's bundle and admin tools, its
 *                                           database drivers, a pinned Node runtime, the unit,
 *                                           an env file and install.sh
 *   install-cm-control-plane.sh             that install.sh, to download beside the tarball
 *   cm-<version>.mjs                        cm as one file, for a tenant's own Node
 *   cm-<version>.tgz, cm-sdk-<version>.tgz  cm and @cm/sdk for npm install (pack.ts; alone: npm run pack)
 *   SHA256SUMS                              what install.sh checks the tarball against
 * The Node runtime is the npm registry's `node-linux-<arch>` package (Node's own binary
 * for that platform), pinned by version and integrity below: the registry is all a
 * build machine here reaches, and a tarball built twice carries the same runtime.
 * --version builds the bundle as that version (tests use it for an upgrade).
 */
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { appVersion, buildApp } from "../build";
import { buildConsole } from "../console-build";
import { betterSqliteAddon } from "./native-addon";
import { packCli, packSdk } from "./pack";
import { run } from "./run";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The Node runtime shipped in every release: the engines' floor is 20.19, the bundle targets node20. */
export const NODE_VERSION = "20.20.2";
const NODE_INTEGRITY: Record<Arch, string> = {
  x64: "sha512-PeHQM8wAdmHtZA1mBocygZxs5LiUWtsJezQTkBd0iY987KpGrD1O2tVEydvMZiuXceRanxt7rjTnDEBwOPujoQ==",
  arm64: "sha512-LCXJnNTFiyGuYBw2gZSI5OBFMbkjAPt8sqD/NKrWoE2QmDgSubTqFng6GaNJ9EJ8HpxBMGcWWpbbcs4Vo+CnGg==",
};
export type Arch = "x64" | "arm64";
export const ARCHES: Arch[] = ["x64", "arm64"];

/** Where downloaded runtimes are kept between releases (dist/ is not committed). */
export const CACHE_DIR = path.join(ROOT, "dist", ".cache");

export interface ReleaseOptions {
  arches: Arch[];
  outDir: string;
  /** the version to build and name the release (default: the agent's package.json version) */
  version?: string;
  /** gzip's level (default 6); tests take 1, a third of the time for a tarball a few MB larger */
  gzipLevel?: number;
}

/** The registry's Node binary package for `arch`, checked against the pinned integrity. */
export async function nodeRuntimePackage(arch: Arch): Promise<string> {
  const name = `node-linux-${arch}`;
  const file = path.join(CACHE_DIR, `${name}-${NODE_VERSION}.tgz`);
  const integrity = () => `sha512-${createHash("sha512").update(readFileSync(file)).digest("base64")}`;
  if (!existsSync(file) || integrity() !== NODE_INTEGRITY[arch]) {
    mkdirSync(CACHE_DIR, { recursive: true });
    // npm's own client: its registry settings and cache, no other host. Packed aside and moved in whole:
    // two releases at once (the tests run several) must never read the other's half-written file.
    const aside = mkdtempSync(path.join(CACHE_DIR, ".pack-"));
    try {
      await run("npm", ["pack", `${name}@${NODE_VERSION}`, "--pack-destination", aside, "--silent"], { stdout: "ignore", stderr: "inherit" });
      renameSync(path.join(aside, path.basename(file)), file);
    } finally {
      rmSync(aside, { recursive: true, force: true });
    }
  }
  const got = integrity();
  if (got !== NODE_INTEGRITY[arch])
    throw new Error(`${name}@${NODE_VERSION} from the registry has integrity ${got}, pinned ${NODE_INTEGRITY[arch]}: refusing it`);
  return file;
}

/** bin/<name> of a release: lib/<bundle> run by the Node runtime the release carries, after `preamble`. */
const wrapper = (name: string, bundle: string, preamble = "") => `#!/bin/sh
# ${name}, run by the Node runtime it was released with (../node), whatever node is on PATH.
here="$(dirname "$(readlink -f "$0")")"
${preamble}exec "$here/../node/bin/node" "$here/../lib/${bundle}" "$@"
`;

/**
 * A product's installer as released: its version filled in, and the functions the
 * installers share (deploy/release/install-lib.sh) put in place of its @INSTALL_LIB@
 * line, so what an operator downloads is one file.
 */
export function installScript(product: "agent" | "control-plane", version: string): string {
  const lib = readFileSync(path.join(ROOT, "deploy/release/install-lib.sh"), "utf8");
  const text = readFileSync(path.join(ROOT, `deploy/${product}/install.sh`), "utf8");
  const marker = /^# @INSTALL_LIB@.*\n/m;
  if (!marker.test(text) || !text.includes('VERSION="@VERSION@"')) throw new Error(`deploy/${product}/install.sh lacks its @INSTALL_LIB@ line or VERSION`);
  return text.replace('VERSION="@VERSION@"', `VERSION="${version}"`).replace(marker, () => lib);
}

export async function releaseAgent(options: ReleaseOptions): Promise<string[]> {
  const version = options.version ?? appVersion("agent");
  if (!/^[0-9A-Za-z.+-]+$/.test(version)) throw new Error(`"${version}" is not a version`);
  mkdirSync(options.outDir, { recursive: true });
  const installer = installScript("agent", version);
  const made: string[] = [];
  const bundleDir = mkdtempSync(path.join(tmpdir(), "cm-release-bundle-"));
  try {
    const { file: bundle } = await buildApp("agent", { version, outDir: bundleDir });
    for (const arch of options.arches) made.push(await packArch(arch, version, bundle, installer, options));
  } finally {
    rmSync(bundleDir, { recursive: true, force: true });
  }
  const installerOut = path.join(options.outDir, "install-cm-agent.sh");
  writeFileSync(installerOut, installer, { mode: 0o755 });
  made.push(installerOut);
  writeSums(options.outDir);
  return made;
}

/**
 * `cm` as one file, cm-<version>.mjs: a tenant runs it with their own Node 20.19+
 * (`node cm-<version>.mjs`, or directly: its first line is `#!/usr/bin/env node`).
 */
export async function releaseCli(options: Pick<ReleaseOptions, "outDir">): Promise<string> {
  const version = appVersion("cli");
  mkdirSync(options.outDir, { recursive: true });
  const bundleDir = mkdtempSync(path.join(tmpdir(), "cm-release-cli-"));
  try {
    const { file } = await buildApp("cli", { outDir: bundleDir });
    const out = path.join(options.outDir, `cm-${version}.mjs`);
    copyFileSync(file, out);
    chmodSync(out, 0o755);
    writeSums(options.outDir);
    return out;
  } finally {
    rmSync(bundleDir, { recursive: true, force: true });
  }
}

/** cm-admin reads the control plane's settings (DATABASE_URL, CM_HOME) from its env file, when this user may. */
const ADMIN_ENV = `env_file="\${CM_CONTROL_PLANE_ENV:-/etc/cm-control-plane/control-plane.env}"
if [ -r "$env_file" ]; then set -a; . "$env_file"; set +a; fi
`;

/**
 * What the bundle leaves to node_modules beside it: better-sqlite3 (native), postgres
 * (patched at install by scripts/patch-postgres.mjs, so taken as installed) and
 * swagger-ui-dist (files the docs page serves). Only what they load at run time.
 */
const CONTROL_PLANE_MODULES: [string, string[]][] = [
  ["better-sqlite3", ["package.json", "LICENSE", "lib"]],
  ["bindings", ["package.json", "LICENSE.md", "bindings.js"]],
  ["file-uri-to-path", ["package.json", "LICENSE", "index.js"]],
  ["postgres", ["package.json", "UNLICENSE", "cf", "cjs", "src"]],
  [
    "swagger-ui-dist",
    [
      "package.json",
      "LICENSE",
      "NOTICE",
      "absolute-path.js",
      "index.js",
      "swagger-ui.css",
      "swagger-ui-bundle.js",
      "swagger-ui-bundle.js.LICENSE.txt",
      "swagger-ui-standalone-preset.js",
      "favicon-16x16.png",
      "favicon-32x32.png",
      "oauth2-redirect.html",
    ],
  ],
];

/** better-sqlite3's native addon, as its loader (bindings) looks for it; built for the tarball's architecture. */
const ADDON = "better-sqlite3/build/Release/better_sqlite3.node";

/** The machine an ELF file (a native addon) is built for, from its header's e_machine. */
export function elfArch(file: string): Arch | "other" {
  const header = readFileSync(file).subarray(0, 20);
  const machine = header.readUInt16LE(18);
  return machine === 0x3e ? "x64" : machine === 0xb7 ? "arm64" : "other";
}

/**
 * The control plane's tarball for each architecture whose better-sqlite3 addon this
 * machine has or can cross-compile (native-addon.ts). One it cannot is skipped with the
 * reason, in the returned `skipped`.
 */
export async function releaseControlPlane(options: ReleaseOptions): Promise<{ made: string[]; skipped: string[] }> {
  const version = options.version ?? appVersion("control-plane");
  if (!/^[0-9A-Za-z.+-]+$/.test(version)) throw new Error(`"${version}" is not a version`);
  mkdirSync(options.outDir, { recursive: true });
  const made: string[] = [];
  const skipped: string[] = [];
  const bundleDir = mkdtempSync(path.join(tmpdir(), "cm-release-cp-"));
  try {
    await buildApp("control-plane", { outDir: bundleDir });
    // The web console it serves under /app/, built afresh from these sources: it finds it in console/ beside lib/ (routes/console.ts).
    await buildConsole(path.join(bundleDir, "console"));
    for (const arch of options.arches) {
      const addon = await betterSqliteAddon(arch, {
        root: ROOT,
        cacheDir: CACHE_DIR,
        nodePackage: () => nodeRuntimePackage(arch),
        nodeVersion: NODE_VERSION,
        elfArch,
      });
      if ("skipped" in addon) skipped.push(addon.skipped);
      else made.push(await packControlPlane(arch, version, bundleDir, addon.file, options));
    }
  } finally {
    rmSync(bundleDir, { recursive: true, force: true });
  }
  if (made.length > 0) {
    const installerOut = path.join(options.outDir, "install-cm-control-plane.sh");
    writeFileSync(installerOut, installScript("control-plane", version), { mode: 0o755 });
    made.push(installerOut);
  }
  writeSums(options.outDir);
  return { made, skipped };
}

async function packControlPlane(arch: Arch, version: string, bundleDir: string, addon: string, options: ReleaseOptions): Promise<string> {
  const name = `cm-control-plane-${version}-linux-${arch}`;
  const work = mkdtempSync(path.join(tmpdir(), "cm-release-"));
  try {
    const dir = path.join(work, name);
    for (const sub of ["bin", "node/bin"]) mkdirSync(path.join(dir, sub), { recursive: true });
    cpSync(path.join(bundleDir, "lib"), path.join(dir, "lib"), { recursive: true });
    cpSync(path.join(bundleDir, "migrations"), path.join(dir, "migrations"), { recursive: true });
    cpSync(path.join(bundleDir, "console"), path.join(dir, "console"), { recursive: true });
    writeFileSync(path.join(dir, "bin/cm-control-plane"), wrapper("cm-control-plane", "control-plane.mjs"), { mode: 0o755 });
    writeFileSync(path.join(dir, "bin/cm-admin"), wrapper("cm-admin", "admin.mjs", ADMIN_ENV), { mode: 0o755 });
    for (const [pkg, files] of CONTROL_PLANE_MODULES) {
      for (const file of files) {
        const from = path.join(ROOT, "node_modules", pkg, file);
        if (!existsSync(from)) continue; // a licence file some version renamed: not worth failing a release
        cpSync(from, path.join(dir, "node_modules", pkg, file), { recursive: true });
      }
    }
    cpSync(addon, path.join(dir, "node_modules", ADDON));
    await unpackNode(arch, work, dir);
    copyFileSync(path.join(ROOT, "deploy/control-plane/cm-control-plane.service"), path.join(dir, "cm-control-plane.service"));
    copyFileSync(path.join(ROOT, "deploy/control-plane/control-plane.env"), path.join(dir, "control-plane.env"));
    writeFileSync(path.join(dir, "install.sh"), installScript("control-plane", version), { mode: 0o755 });
    copyFileSync(path.join(ROOT, "README.md"), path.join(dir, "README.md"));
    writeFileSync(path.join(dir, "VERSION"), `${version}\n`);
    writeFileSync(path.join(dir, "ARCH"), `${arch}\n`);
    return await tar(work, name, options);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The pinned Node runtime's binary and licence, into dir/node. */
async function unpackNode(arch: Arch, work: string, dir: string): Promise<void> {
  await run("tar", ["-xzf", await nodeRuntimePackage(arch), "-C", work, "package/bin/node", "package/LICENSE"]);
  copyFileSync(path.join(work, "package/bin/node"), path.join(dir, "node/bin/node"));
  chmodSync(path.join(dir, "node/bin/node"), 0o755);
  copyFileSync(path.join(work, "package/LICENSE"), path.join(dir, "node/LICENSE"));
}

async function tar(work: string, name: string, options: ReleaseOptions): Promise<string> {
  const tarball = path.join(options.outDir, `${name}.tar.gz`);
  // Owned by root and writable by root alone, whatever user and umask built it (under umask 000
  // every directory was 0777): an install moves the tree into /opt, where root runs it.
  // Directories 0755, files 0644, or 0755 where any x bit was set; no setuid, setgid or sticky bit.
  const gzip = `gzip -${options.gzipLevel ?? 6} -n`;
  const owner = ["--owner=root:0", "--group=root:0", "--mode=u=rwX,go=rX,a-st"];
  await run("tar", ["-c", "-I", gzip, "-f", tarball, ...owner, "-C", work, name]);
  return tarball;
}

/** One architecture's tarball; returns its path. */
async function packArch(arch: Arch, version: string, bundle: string, installer: string, options: ReleaseOptions): Promise<string> {
  const name = `cm-agent-${version}-linux-${arch}`;
  const work = mkdtempSync(path.join(tmpdir(), "cm-release-"));
  try {
    const dir = path.join(work, name);
    for (const sub of ["bin", "lib", "node/bin"]) mkdirSync(path.join(dir, sub), { recursive: true });
    copyFileSync(bundle, path.join(dir, "lib/cm-agent.mjs"));
    copyFileSync(`${bundle}.LEGAL.txt`, path.join(dir, "lib/cm-agent.mjs.LEGAL.txt"));
    writeFileSync(path.join(dir, "bin/cm-agent"), wrapper("cm-agent", "cm-agent.mjs"), { mode: 0o755 });
    await unpackNode(arch, work, dir);
    copyFileSync(path.join(ROOT, "deploy/agent/cm-agent.service"), path.join(dir, "cm-agent.service"));
    writeFileSync(path.join(dir, "install.sh"), installer, { mode: 0o755 });
    copyFileSync(path.join(ROOT, "apps/agent/README.md"), path.join(dir, "README.md"));
    writeFileSync(path.join(dir, "VERSION"), `${version}\n`);
    writeFileSync(path.join(dir, "ARCH"), `${arch}\n`);
    return await tar(work, name, options);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** SHA256SUMS over every artefact in the directory, in `sha256sum -c`'s format. */
function writeSums(dir: string): void {
  const lines = readdirSync(dir)
    .filter((name) => name.endsWith(".tar.gz") || name.endsWith(".sh") || name.endsWith(".mjs"))
    .sort()
    .map(
      (name) =>
        `${createHash("sha256")
          .update(readFileSync(path.join(dir, name)))
          .digest("hex")}  ${name}`,
    );
  writeFileSync(path.join(dir, "SHA256SUMS"), `${lines.join("\n")}\n`);
}

function parseOptions(argv: string[]): ReleaseOptions {
  const options: ReleaseOptions = { arches: ARCHES, outDir: path.join(ROOT, "dist/release") };
  for (let i = 0; i < argv.length; i++) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === "--arch") {
      if (!ARCHES.includes(value as Arch)) throw new Error(`--arch takes ${ARCHES.join(" or ")}`);
      options.arches = [value as Arch];
    } else if (flag === "--out") options.outDir = path.resolve(value);
    else if (flag === "--version") options.version = value;
    else throw new Error(`unknown option ${flag} (--arch x64|arm64, --out DIR, --version V)`);
    i++;
  }
  return options;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  const options = parseOptions(process.argv.slice(2));
  const controlPlane = await releaseControlPlane(options);
  const made = [
    ...(await releaseAgent(options)),
    ...controlPlane.made,
    await releaseCli(options),
    await packCli(options.outDir),
    await packSdk(options.outDir),
  ];
  for (const line of controlPlane.skipped) process.stdout.write(`skipped ${line}\n`);
  for (const file of made) process.stdout.write(`${path.relative(process.cwd(), file)} (${(statSync(file).size / 1e6).toFixed(1)} MB)\n`);
  process.stdout.write(
    `${path.relative(process.cwd(), path.join(path.dirname(made[0]!), "SHA256SUMS"))}\nreleased in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
  );
}
