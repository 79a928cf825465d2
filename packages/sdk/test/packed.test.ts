import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { sqliteDatabase } from "@cm/testkit";
import nacl from "tweetnacl";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../../../apps/control-plane/test/support/harness";
import { packSdk } from "../../../scripts/release/pack";

// The SDK as someone outside this repository gets it (issue 39): `npm run pack`'s tarball,
// installed in a folder outside the checkout, a program typechecked under NodeNext and
// under Bundler with strict, then run by plain node against a real control plane.

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, "../../..");
const TSC = path.join(ROOT, "node_modules/typescript/bin/tsc");
const ESBUILD = path.join(ROOT, "node_modules/esbuild/bin/esbuild");

/** A user's program: every value it takes from the SDK is checked not to be `any`. */
const PROGRAM = `import { ApiError, createClient, keypairSigner, type Deployment, type DeploymentStatus } from "@cm/sdk";

type IsAny<T> = 0 extends 1 & T ? true : false;
/** Compiles only when T is not any. */
function typed<T>(value: T, ..._notAny: IsAny<T> extends true ? [never] : []): T {
  return value;
}

const cm = typed(createClient({ baseUrl: process.env.CM_API ?? "" }));
const secretKey = Uint8Array.from(JSON.parse(process.env.CM_SECRET_KEY ?? "[]") as number[]);
const signedIn = typed(await cm.auth.signIn(await keypairSigner(secretKey)));
const me = typed(await cm.auth.me());
const walletAddress: string = typed(me.user.walletAddress);
const { nodes, pagination } = typed(await cm.nodes.list({ status: "online", region: "eu-west" }));
typed(nodes);
typed(pagination);
const { templates } = typed(await cm.templates.list({ category: "llm" }));
const { deployments } = typed(await cm.deployments.list({ status: "running" }));
const first: Deployment | undefined = deployments[0];
const status: DeploymentStatus | undefined = first?.status;
typed(cm.deployments.follow);
typed(cm.deployments.waitFor);
const balance = typed(await cm.credits.balance());
// Never called: what the compiler refuses.
export const refused = () => [
  // @ts-expect-error a status the API does not have
  cm.deployments.list({ status: "sleeping" }),
  // @ts-expect-error a region the API does not have
  cm.nodes.list({ region: "mars" }),
];
const missing = await cm.deployments.get("dep_nothing_here").catch((err: unknown) => err);
if (!(missing instanceof ApiError)) throw new Error("expected an ApiError");
// A script's API key, read-only: it lists, and what it may not do is refused naming the scope.
const created = typed(await cm.auth.apiKeys.create({ name: "a script", scopes: ["read"] }));
const script = typed(createClient({ baseUrl: process.env.CM_API ?? "", apiKey: created.key }));
const listedByKey = typed(await script.deployments.list());
const refusedByKey = await script.deployments.create({ nodeId: "node_x", customImage: "busybox" }).catch((err: unknown) => err);
if (!(refusedByKey instanceof ApiError)) throw new Error("expected an ApiError");
console.log(JSON.stringify({
  signedIn: signedIn.user.walletAddress === walletAddress,
  nodes: nodes.length,
  templates: templates.length,
  deployments: deployments.length,
  status: status ?? null,
  balance: typeof balance.balance,
  missing: [missing.status, missing.code],
  apiKey: [created.key.slice(0, 4), listedByKey.deployments.length, refusedByKey.status, refusedByKey.code],
}));
`;

const TSCONFIGS = {
  NodeNext: { module: "NodeNext", moduleResolution: "NodeNext" },
  Bundler: { module: "ESNext", moduleResolution: "Bundler" },
};

let h: Harness;
let dir: string;
const secretKey = JSON.stringify([...nacl.sign.keyPair().secretKey]);

beforeAll(async () => {
  const started = Date.now();
  h = await startHarness(sqliteDatabase);
  dir = mkdtempSync(path.join(tmpdir(), "cm-sdk-user-"));
  const tarball = await packSdk(path.join(dir, "packed"));
  writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "sdk-user", private: true, type: "module" }));
  // From npm's cache where it has them: the tarball's own dependencies come from the registry, never from this checkout.
  await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", tarball, "@types/node@^20"], { cwd: dir });
  writeFileSync(path.join(dir, "main.ts"), PROGRAM);
  console.log(`packed and installed in ${Date.now() - started} ms`);
}, 240_000);
afterAll(async () => {
  await h?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("the packed SDK, installed outside the repository", () => {
  it("is one tarball of JavaScript, declarations and the README, with no @cm/ import left", async () => {
    const { stdout } = await run("tar", ["tzf", path.join(dir, "packed", readdirSync(path.join(dir, "packed"))[0]!)]);
    expect(stdout.split("\n").filter(Boolean).sort()).toEqual([
      "package/README.md",
      "package/dist/index.d.ts",
      "package/dist/index.js",
      "package/dist/index.js.map",
      "package/package.json",
    ]);
    const { stdout: imports } = await run(
      "grep",
      ["-ho", `from ["'][^"'.][^"']*["']`, "node_modules/@cm/sdk/dist/index.js", "node_modules/@cm/sdk/dist/index.d.ts"],
      {
        cwd: dir,
      },
    );
    expect(new Set(imports.split("\n").filter(Boolean))).toEqual(new Set([`from "bs58"`, `from 'zod'`]));
  });

  for (const [name, options] of Object.entries(TSCONFIGS)) {
    it(`typechecks under ${name} with strict, no any from the SDK, and runs with node`, async () => {
      const out = path.join(dir, `out-${name}`);
      mkdirSync(out);
      const tsconfig = path.join(dir, `tsconfig.${name}.json`);
      writeFileSync(
        tsconfig,
        JSON.stringify({
          compilerOptions: { ...options, target: "ES2022", lib: ["ES2022"], types: ["node"], strict: true, outDir: out, skipLibCheck: false },
          files: ["main.ts"],
        }),
      );
      const checked = await run("node", [TSC, "-p", tsconfig]).catch((err: { stdout: string }) => err);
      expect(checked.stdout).toBe("");
      // NodeNext: tsc's own output, as node runs it. Bundler: what a bundler makes of it (esbuild, one file).
      const program = path.join(out, "main.js");
      if (name === "Bundler")
        await run(ESBUILD, ["main.ts", "--bundle", "--platform=node", "--format=esm", `--outfile=${program}`, "--log-level=error"], { cwd: dir });
      const { stdout } = await run("node", [program], { cwd: dir, env: { PATH: process.env.PATH, CM_API: h.url, CM_SECRET_KEY: secretKey } });
      expect(JSON.parse(stdout)).toEqual({
        signedIn: true,
        nodes: 0,
        templates: expect.any(Number),
        deployments: 0,
        status: null,
        balance: "object",
        missing: [404, "DEPLOYMENT_NOT_FOUND"],
        apiKey: ["cmk_", 0, 403, "INSUFFICIENT_SCOPE"],
      });
    }, 120_000);
  }
});
