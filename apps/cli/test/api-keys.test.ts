import { sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Harness, startHarness } from "../../control-plane/test/support/harness";
import { terminal } from "./support/cli";

// cm auth keys create|ls|rm and CM_API_KEY: the real `cm` as a subprocess against a
// real control plane (SQLite, port 0).

let h: Harness;
let t: ReturnType<typeof terminal>;
/** A terminal that never signed in: only CM_API_KEY can get it anywhere. */
let script: ReturnType<typeof terminal>;
let nodeId: string;
beforeAll(async () => {
  h = await startHarness(sqliteDatabase);
  t = terminal({ CM_API_URL: h.url });
  script = terminal({ CM_API_URL: h.url });
  t.keypair();
  expect((await t.cm(["login"])).code).toBe(0);
  const me = await h.call("GET", "/auth/me", { token: (await t.cm(["token"])).stdout.trim() });
  expect(me.json.user.walletAddress).toBeDefined();
  await h.grantCredits(me.json.user.id, 1_000);
  nodeId = (await h.onlineNode((await h.signIn()).token)).id;
}, 120_000);
afterAll(async () => {
  t?.close();
  script?.close();
  await h?.close();
});

it("creates a key (printed once, alone on stdout), lists it without the key, uses it through CM_API_KEY and deletes it", async () => {
  const created = await t.cm(["auth", "keys", "create", "--name", "ci", "--scope", "read,deploy", "--expires", "30d"]);
  expect(created.code, created.stderr).toBe(0);
  const key = created.stdout.trim();
  expect(created.stdout).toMatch(/^cmk_[A-Za-z0-9_-]{43}\n$/);
  expect(created.stderr).toContain("only time the key is shown");
  expect(created.stderr).toMatch(/Created key_\S+ "ci" \(read, deploy, expires \d{4}-/);
  const id = /Created (key_\S+)/.exec(created.stderr)![1]!;

  const listed = await t.cm(["auth", "keys", "ls"]);
  expect(listed.code, listed.stderr).toBe(0);
  expect(listed.stdout).toMatch(new RegExp(`^${id}\\tci\\t${key.slice(0, 12)}…\\tread,deploy\\t\\S+\\tnever\\t\\S+\\n$`));
  const json = JSON.parse((await t.cm(["auth", "keys", "ls", "--json"])).stdout);
  expect(json.apiKeys).toEqual([expect.objectContaining({ id, name: "ci", prefix: key.slice(0, 12), scopes: ["read", "deploy"], lastUsedAt: null })]);
  for (const out of [listed.stdout, listed.stderr, JSON.stringify(json)]) expect(out).not.toContain(key);

  // A terminal with no session works with the key alone, within its scopes.
  const env = { CM_API_KEY: key };
  const deployed = await script.cm(["deploy", "--image", "busybox:1.36", "--node", nodeId, "--json"], env);
  expect(deployed.code, deployed.stderr).toBe(0);
  const ls = await script.cm(["ls"], env);
  expect(ls.code, ls.stderr).toBe(0);
  expect(ls.stdout).toContain(JSON.parse(deployed.stdout).deployment.id);
  expect(JSON.parse((await t.cm(["auth", "keys", "ls", "--json"])).stdout).apiKeys[0].lastUsedAt).not.toBeNull();

  // Outside its scopes, and managing keys: the refusal says which credential cm sent and what to do.
  const operator = await script.cm(["operator", "nodes"], env);
  expect(operator.code).toBe(1);
  expect(operator.stderr).toMatch(/^error INSUFFICIENT_SCOPE: .*'operator'.* \(cm sent the API key in CM_API_KEY, cmk_\S{8}…: give a key the scope/);
  expect(operator.stderr).not.toContain(key);
  const minting = await t.cm(["auth", "keys", "create", "--name", "more"], env);
  expect(minting.stderr).toMatch(/^error INSUFFICIENT_SCOPE: API keys are created, listed and deleted only with a signed-in wallet session/);

  const removed = await t.cm(["auth", "keys", "rm", id]);
  expect(removed).toMatchObject({ code: 0, stderr: `Deleted ${id}: it no longer works.\n` });
  const refused = await script.cm(["ls"], env);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(
    /^error UNAUTHORIZED: .*\(cm sent the API key in CM_API_KEY, cmk_\S{8}…: the key was deleted or never issued; create another with `cm auth keys create`/,
  );
  expect((await t.cm(["auth", "keys", "ls"])).stderr).toContain("No API keys.");
  expect((await t.cm(["auth", "keys", "rm", id])).stderr).toMatch(/^error API_KEY_NOT_FOUND/);
});

it("grants read by default and never payouts unless named; refuses bad scopes, durations and a missing name before asking the API", async () => {
  const plain = await t.cm(["auth", "keys", "create", "--name", "reader", "--json"]);
  expect(plain.code, plain.stderr).toBe(0);
  const answer = JSON.parse(plain.stdout);
  expect(answer.apiKey.scopes).toEqual(["read"]);
  expect(answer.key).toMatch(/^cmk_/);
  const deploy = await script.cm(["deploy", "--image", "busybox:1.36", "--node", nodeId], { CM_API_KEY: answer.key });
  expect(deploy.stderr).toMatch(/^error INSUFFICIENT_SCOPE: this API key lacks the 'deploy' scope/);
  const payouts = await t.cm(["auth", "keys", "create", "--name", "payer", "--scope", "operator,payouts", "--json"]);
  expect(JSON.parse(payouts.stdout).apiKey.scopes).toEqual(["operator", "payouts"]);

  for (const [args, message] of [
    [["--scope", "read,admin"], "--scope takes a comma-separated list of read, deploy, operator, payouts, not admin"],
    [["--expires", "30"], "--expires takes a number and a unit"],
    [["--expires", "400d"], "--expires must be between 1 minute and 366 days"],
  ] as const) {
    const r = await t.cm(["auth", "keys", "create", "--name", "x", ...args]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain(message);
  }
  const unnamed = await t.cm(["auth", "keys", "create"]);
  expect([unnamed.code, unnamed.stderr.split("\n")[0]]).toEqual([2, "error: give --name, to know the key by"]);
  expect((await t.cm(["auth", "keys", "--help"])).code).toBe(2);
  expect((await t.cm(["auth", "keys", "create", "--help"])).stdout).toContain("Usage: cm auth keys create --name N");
});
