/**
 * `npm run build` (through turbo, one app at a time: `tsx ../../scripts/build.ts agent`):
 * bundles an app and its dependencies into one ES module under apps/<app>/dist/, run by
 * `node` alone, no tsx and no node_modules. What cannot be bundled stays out:
 * - native addons: ssh2's optional cpu-features and sshcrypto (dockerode reaches ssh2 for
 *   ssh:// Docker hosts; both are loaded in try/catch and ssh2 falls back to pure JS), ws's
 *   optional bufferutil and utf-8-validate (same);
 * - the control plane's database drivers (better-sqlite3 is native; postgres is patched at
 *   install, scripts/patch-postgres.mjs): shipped beside the bundle in node_modules.
 */
import { chmodSync, cpSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build, type Plugin } from "esbuild";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

interface AppBuild {
  /** the app's source entry */
  entry: string;
  /** the bundle's file name under apps/<app>/dist/ */
  out: string;
  external: string[];
  /** files the bundle reads at run time, copied beside it: [from (repo-relative), to (dist-relative)] */
  copy?: [string, string][];
  /** more programs of the same app, bundled alike beside the first: [entry, out] */
  more?: [string, string][];
}

const NATIVE_OPTIONAL = ["cpu-features", "bufferutil", "utf-8-validate", "*.node"];

export const APPS: Record<string, AppBuild> = {
  agent: { entry: "apps/agent/src/index.ts", out: "cm-agent.mjs", external: NATIVE_OPTIONAL },
  cli: { entry: "apps/cli/src/index.ts", out: "cm.mjs", external: NATIVE_OPTIONAL },
  "control-plane": {
    entry: "apps/control-plane/src/index.ts",
    out: "lib/control-plane.mjs",
    external: [...NATIVE_OPTIONAL, "better-sqlite3", "postgres", "swagger-ui-dist"],
    // packages/db reads its migrations at ../migrations/<dialect> from its own module.
    copy: [["packages/db/migrations", "migrations"]],
    // `npm run admin`'s tools, for a control plane run from a release.
    more: [["apps/control-plane/src/admin.ts", "lib/admin.mjs"]],
  },
};

// An ES module bundle of CommonJS packages: their require() of Node's built-ins needs a require.
// ssh2 reads __dirname at load (for a Windows helper it never runs here).
const BANNER = [
  "import { createRequire as __cmCreateRequire } from 'node:module';",
  "import { dirname as __cmDirname } from 'node:path';",
  "import { fileURLToPath as __cmFileURLToPath } from 'node:url';",
  "const require = __cmCreateRequire(import.meta.url);",
  "const __filename = __cmFileURLToPath(import.meta.url);",
  "const __dirname = __cmDirname(__filename);",
].join("\n");

export interface BuildOptions {
  /** the version the agent reports (its AGENT_VERSION), when not the source's: a release's */
  version?: string;
  /** where to write it, instead of apps/<app>/dist (a release builds aside) */
  outDir?: string;
}

export async function buildApp(name: string, options: BuildOptions = {}): Promise<{ file: string; bytes: number }> {
  const app = APPS[name];
  if (!app) throw new Error(`unknown app "${name}" (apps: ${Object.keys(APPS).join(", ")})`);
  const dist = options.outDir ?? path.join(ROOT, "apps", name, "dist");
  rmSync(dist, { recursive: true, force: true });
  mkdirSync(dist, { recursive: true });
  const file = path.join(dist, app.out);
  for (const [entry, out] of app.more ?? []) await bundle(name, path.join(ROOT, entry), path.join(dist, out), options);
  await bundle(name, path.join(ROOT, app.entry), file, options);
  for (const [from, to] of app.copy ?? []) cpSync(path.join(ROOT, from), path.join(dist, to), { recursive: true });
  return { file, bytes: statSync(file).size };
}

async function bundle(name: string, entry: string, file: string, options: BuildOptions): Promise<void> {
  const app = APPS[name]!;
  const result = await build({
    entryPoints: [entry],
    outfile: file,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "esm",
    banner: { js: BANNER },
    external: app.external,
    // Kept names: errors' and classes' names appear in logs and in instanceof-free checks.
    keepNames: true,
    minifySyntax: true,
    legalComments: "linked",
    logLevel: "warning",
    logOverride: { "empty-import-meta": "silent" },
    plugins: [pureBigint, ...(options.version === undefined ? [] : [agentVersion(options.version)])],
  });
  if (result.errors.length > 0) throw new Error(`esbuild failed for ${name}`);
  // The source's own hashbang (cm's runs tsx) is kept by esbuild: the bundle needs node only.
  const text = readFileSync(file, "utf8");
  writeFileSync(file, `#!/usr/bin/env node\n${text.startsWith("#!") ? text.slice(text.indexOf("\n") + 1) : text}`);
  chmodSync(file, 0o755);
}

/**
 * bigint-buffer (under @solana/web3.js) tries its native addon, which a bundle never ships,
 * and warns on every start that it fell back to pure JS: the fallback is the bundle's
 * intent, so it is taken without the attempt or the warning.
 */
const pureBigint: Plugin = {
  name: "pure-bigint-buffer",
  setup(build) {
    build.onLoad({ filter: /[\\/]bigint-buffer[\\/]dist[\\/]node\.js$/ }, ({ path: file }) => {
      const source = readFileSync(file, "utf8");
      const contents = source
        .replace("converter = require('bindings')('bigint_buffer');", "throw new Error('bundled: pure JS');")
        .replace(/console\.warn\('bigint: [^\n]*/, "");
      return { contents, loader: "js" };
    });
  },
};

/** Builds apps/agent/src/version.ts as reporting `version`. */
function agentVersion(version: string): Plugin {
  return {
    name: "agent-version",
    setup(build) {
      build.onLoad({ filter: /[\\/]apps[\\/]agent[\\/]src[\\/]version\.ts$/ }, ({ path: file }) => {
        const source = readFileSync(file, "utf8");
        const contents = source.replace(/(export const AGENT_VERSION = )"[^"]*"/, `$1${JSON.stringify(version)}`);
        if (contents === source && !source.includes(JSON.stringify(version))) throw new Error(`no AGENT_VERSION = "..." in ${file}`);
        return { contents, loader: "ts" };
      });
    },
  };
}

export function appVersion(name: string): string {
  return (JSON.parse(readFileSync(path.join(ROOT, "apps", name, "package.json"), "utf8")) as { version: string }).version;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const names = process.argv.slice(2);
  for (const name of names.length > 0 ? names : Object.keys(APPS)) {
    const started = Date.now();
    const { file, bytes } = await buildApp(name);
    process.stdout.write(`built ${path.relative(ROOT, file)} (${(bytes / 1e6).toFixed(1)} MB) in ${Date.now() - started} ms\n`);
  }
}
