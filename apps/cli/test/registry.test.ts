import { spawn } from "node:child_process";
import { join } from "node:path";
import { sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Harness, startHarness, TestClock } from "../../control-plane/test/support/harness";
import { type CliResult, ENTRY, ROOT, TSX, terminal } from "./support/cli";

// cm registry and cm deploy --registry-credential: the real `cm` as a subprocess
// against a real control plane (SQLite, port 0), the password given on stdin.

const PASSWORD = "ghp_registry-token-for-cm";

let h: Harness;
let t: ReturnType<typeof terminal>;
beforeAll(async () => {
  h = await startHarness(sqliteDatabase, { overrides: { clock: new TestClock(Date.now()) } });
  t = terminal({ CM_API_URL: h.url });
  t.keypair();
  expect((await t.cm(["login"])).code).toBe(0);
}, 120_000);
afterAll(async () => {
  t?.close();
  await h?.close();
});

/** cm with `input` written to its stdin, then closed: as `echo "$TOKEN" | cm ...`. */
function cmWithStdin(args: string[], input: string): Promise<CliResult> {
  return new Promise((done) => {
    const child = spawn(TSX, [ENTRY, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: t.home, XDG_CONFIG_HOME: join(t.home, ".config"), NO_COLOR: "1", CM_API_URL: h.url },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => done({ code: code ?? -1, stdout, stderr }));
    child.stdin.end(input);
  });
}

it("adds a login from stdin, lists it without the password, deploys with it and removes it", async () => {
  const added = await cmWithStdin(["registry", "add", "ghcr.io", "--username", "octocat", "--password-stdin"], `${PASSWORD}\n`);
  expect(added.code, added.stderr).toBe(0);
  const id = added.stdout.trim();
  expect(id).toMatch(/^rcred_/);
  expect(added.stderr).toContain(`cm deploy --image ghcr.io/IMAGE --registry-credential ${id}`);

  const listed = await t.cm(["registry", "list"]);
  expect(listed.code, listed.stderr).toBe(0);
  expect(listed.stdout).toContain(`${id}\tghcr.io\toctocat\t`);
  expect(listed.stdout).toContain("never");
  const json = await t.cm(["registry", "list", "--json"]);
  expect(JSON.parse(json.stdout).credentials).toEqual([expect.objectContaining({ id, registry: "ghcr.io", username: "octocat" })]);
  for (const out of [added, listed, json]) expect(out.stdout + out.stderr).not.toContain(PASSWORD);
  // The line echo adds is not part of the password: what the node would be sent is exactly what was piped less it.
  expect((await h.deps.registryCredentials.authFor(id))?.password).toBe(PASSWORD);

  // --registry-credential reaches the API: a credential for another registry is refused by name.
  const mismatch = await t.cm(["deploy", "--image", "quay.io/acme/app:1", "--node", "node_nope", "--registry-credential", id, "--", "sleep", "1"]);
  expect(mismatch.code).toBe(1);
  expect(mismatch.stderr).toMatch(
    /^error REGISTRY_CREDENTIAL_MISMATCH: registry credential rcred_\S+ is for ghcr\.io, and quay\.io\/acme\/app:1 is pulled from quay\.io/,
  );
  const fits = await t.cm(["deploy", "--image", "ghcr.io/acme/app:1", "--node", "node_nope", "--registry-credential", id, "--", "sleep", "1"]);
  expect(fits.stderr).toMatch(/^error NODE_NOT_FOUND/);

  const removed = await t.cm(["registry", "rm", id]);
  expect(removed.code, removed.stderr).toBe(0);
  expect(JSON.parse((await t.cm(["registry", "list", "--json"])).stdout).credentials).toEqual([]);
  const again = await t.cm(["registry", "rm", id]);
  expect(again.code).toBe(1);
  expect(again.stderr).toMatch(/^error REGISTRY_CREDENTIAL_NOT_FOUND/);
});

it("refuses to read a password from a stdin that is not a terminal without --password-stdin, and an empty one", async () => {
  const noFlag = await cmWithStdin(["registry", "add", "ghcr.io", "--username", "octocat"], PASSWORD);
  expect(noFlag.code).toBe(2);
  expect(noFlag.stderr).toContain("--password-stdin");
  const empty = await cmWithStdin(["registry", "add", "ghcr.io", "--username", "octocat", "--password-stdin"], "\n");
  expect(empty.code).toBe(2);
  expect(empty.stderr).toContain("the password is empty");
  const noUser = await cmWithStdin(["registry", "add", "ghcr.io", "--password-stdin"], PASSWORD);
  expect(noUser.code).toBe(2);
});
