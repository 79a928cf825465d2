/**
 * `npm run pack [-- --out DIR]`: the npm tarballs of what runs outside a checkout (issue 39),
 * in dist/release/ beside the release:
 *   cm-sdk-<version>.tgz  @cm/sdk built to JavaScript with one declaration file, the
 *                         protocol's part inside both; `npm install ./cm-sdk-<version>.tgz`
 *   cm-<version>.tgz      cm as one file with a `cm` bin; `npm install -g ./cm-<version>.tgz`
 * Each is what `npm publish <tarball>` would send.
 *
 * Why esbuild and dts-bundle-generator rather than tsc: @cm/protocol is private and must
 * travel inside the SDK, and tsc copies import specifiers as written, so its output
 * would still import "@cm/protocol" (and the sources' extensionless relative imports,
 * which Node's ESM and TypeScript's NodeNext both refuse). esbuild (already what
 * scripts/build.ts bundles the apps with) inlines it in the JavaScript, and
 * dts-bundle-generator does the same for the types, where tsc cannot.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { BundlerConfig } from "dts-bundle-generator/config-schema";
import { build } from "esbuild";
import { buildApp } from "../build";
import { run } from "./run";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const SDK = path.join(ROOT, "packages/sdk");
/** dts-bundle-generator's CLI, a dev dependency of the SDK's. */
const DTS_BUNDLE_GENERATOR = createRequire(path.join(SDK, "package.json")).resolve("dts-bundle-generator/dist/bin/dts-bundle-generator.js");

interface Manifest {
  name: string;
  version: string;
  description?: string;
  dependencies?: Record<string, string>;
  [key: string]: unknown;
}

const readManifest = (dir: string): Manifest => JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as Manifest;

/** The fields of a workspace's package.json that a published package keeps. */
const PUBLISHED = [
  "name",
  "version",
  "description",
  "license",
  "repository",
  "homepage",
  "keywords",
  "engines",
  "type",
  "peerDependencies",
  "peerDependenciesMeta",
];

/** @cm/sdk as JavaScript (dist/index.js) and declarations (dist/index.d.ts) in `dir`. */
export async function buildSdk(dir: string): Promise<void> {
  const manifest = readManifest(SDK);
  // What stays an import: the registry's packages the SDK depends on; @cm/protocol is inlined.
  const external = [...Object.keys(manifest.dependencies ?? {}), ...Object.keys((manifest.peerDependencies as object) ?? {})].filter(
    (name) => !name.startsWith("@cm/"),
  );
  await build({
    entryPoints: [path.join(SDK, "src/index.ts")],
    outfile: path.join(dir, "index.js"),
    bundle: true,
    // Node 20 and browsers alike: no Node built-in is imported.
    platform: "neutral",
    target: "es2022",
    format: "esm",
    external,
    keepNames: true,
    sourcemap: true,
    logLevel: "warning",
  });
  // @cm/protocol by its sources' path, as the SDK's own files: through node_modules it is an
  // external library, which dts-bundle-generator will not compile.
  const tsconfig = path.join(dir, "tsconfig.dts.json");
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    tsconfig,
    JSON.stringify({
      extends: path.join(ROOT, "tsconfig.json"),
      compilerOptions: {
        paths: { "@cm/protocol": [path.join(ROOT, "packages/protocol/src/index.ts")] },
        typeRoots: [path.join(ROOT, "node_modules/@types")],
      },
      files: [path.join(SDK, "src/index.ts")],
    }),
  );
  // Its own process, by its CLI: generating the declarations compiles the SDK and the protocol
  // with TypeScript, 20 to 35 s of one core, which in a test's worker held the event loop
  // (loop-watch: 54.8 s in packed.test.ts's beforeAll, 60 s failing the run). Its config file
  // is the options generateDtsBundle takes; noCheck, as that function does not check either.
  const config = path.join(dir, "dts-bundle.json");
  const bundler: BundlerConfig = {
    compilationOptions: { preferredConfigPath: tsconfig },
    entries: [
      {
        filePath: path.join(SDK, "src/index.ts"),
        outFile: path.join(dir, "index.d.ts"),
        noCheck: true,
        libraries: { inlinedLibraries: ["@cm/protocol"] },
        output: { noBanner: true, exportReferencedTypes: false },
      },
    ],
  };
  writeFileSync(config, JSON.stringify(bundler));
  await run(process.execPath, [DTS_BUNDLE_GENERATOR, "--silent", "--config", config]);
  rmSync(tsconfig);
  rmSync(config);
}

/** Packs the package laid out in `stage` into `outDir` as `file`; the tarball's path. */
async function npmPack(stage: string, outDir: string, file: string): Promise<string> {
  mkdirSync(outDir, { recursive: true });
  const json = await run("npm", ["pack", "--json", "--pack-destination", outDir], { cwd: stage, stderr: "inherit" });
  const [{ filename }] = JSON.parse(json) as [{ filename: string }];
  const out = path.join(outDir, file);
  if (filename !== file) renameSync(path.join(outDir, filename), out);
  return out;
}

export async function packSdk(outDir: string): Promise<string> {
  const manifest = readManifest(SDK);
  const stage = mkdtempSync(path.join(tmpdir(), "cm-pack-sdk-"));
  try {
    await buildSdk(path.join(stage, "dist"));
    const dependencies = Object.fromEntries(Object.entries(manifest.dependencies ?? {}).filter(([name]) => !name.startsWith("@cm/")));
    const published = {
      ...Object.fromEntries(PUBLISHED.filter((key) => manifest[key] !== undefined).map((key) => [key, manifest[key]])),
      // ESM only (the README says why); "default" lets require() load it on Node 20.19+.
      exports: { ".": { types: "./dist/index.d.ts", import: "./dist/index.js", default: "./dist/index.js" }, "./package.json": "./package.json" },
      types: "./dist/index.d.ts",
      files: ["dist", "README.md"],
      sideEffects: false,
      dependencies,
    };
    writeFileSync(path.join(stage, "package.json"), `${JSON.stringify(published, null, 2)}\n`);
    copyFileSync(path.join(SDK, "README.md"), path.join(stage, "README.md"));
    return await npmPack(stage, outDir, `cm-sdk-${manifest.version}.tgz`);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

/** cm as the bundle the release ships (cm-<version>.mjs), with a bin, so that `npm install -g` puts `cm` on the PATH. */
export async function packCli(outDir: string): Promise<string> {
  const cli = path.join(ROOT, "apps/cli");
  const manifest = readManifest(cli);
  const stage = mkdtempSync(path.join(tmpdir(), "cm-pack-cli-"));
  try {
    await buildApp("cli", { outDir: path.join(stage, "dist") });
    const published = {
      ...Object.fromEntries(PUBLISHED.filter((key) => manifest[key] !== undefined).map((key) => [key, manifest[key]])),
      bin: { cm: "dist/cm.mjs" },
      files: ["dist", "README.md"],
    };
    writeFileSync(path.join(stage, "package.json"), `${JSON.stringify(published, null, 2)}\n`);
    copyFileSync(path.join(cli, "README.md"), path.join(stage, "README.md"));
    return await npmPack(stage, outDir, `cm-${manifest.version}.tgz`);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const at = args.indexOf("--out");
  if (args.length !== (at === -1 ? 0 : 2) || (at !== -1 && !args[at + 1])) throw new Error("usage: npm run pack [-- --out DIR]");
  const outDir = at === -1 ? path.join(ROOT, "dist/release") : path.resolve(args[at + 1]!);
  for (const file of [await packSdk(outDir), await packCli(outDir)]) process.stdout.write(`${path.relative(process.cwd(), file)}\n`);
}
