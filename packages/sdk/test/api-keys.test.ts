import { sqliteDatabase } from "@cm/testkit";
import nacl from "tweetnacl";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Harness, startHarness } from "../../../apps/control-plane/test/support/harness";
import { ApiError, createClient, SessionError } from "../src";

// The SDK with an API key against a real control plane (SQLite, port 0): no sign-in, no session, the key's scopes.

let h: Harness;
let nodeId: string;
beforeAll(async () => {
  h = await startHarness(sqliteDatabase);
  nodeId = (await h.onlineNode((await h.signIn()).token)).id;
});
afterAll(() => h?.close());

const naclSigner = () => {
  const kp = nacl.sign.keyPair();
  return { publicKey: kp.publicKey, signMessage: async (m: Uint8Array) => nacl.sign.detached(m, kp.secretKey) };
};

it("creates a key with a signed-in wallet, then works with the key alone, as far as its scopes go", async () => {
  const wallet = createClient({ baseUrl: h.url });
  const { user } = await wallet.auth.signIn(naclSigner());
  await h.grantCredits(user.id, 1_000);
  const { key, apiKey } = await wallet.auth.apiKeys.create({ name: "ci", scopes: ["read", "deploy"], expiresInS: 3600 });
  expect(key).toMatch(/^cmk_/);
  expect((await wallet.auth.apiKeys.list()).apiKeys).toEqual([apiKey]);

  const script = createClient({ baseUrl: h.url, apiKey: key });
  expect(script.auth.usesApiKey()).toBe(true);
  expect(await script.auth.session()).toBeUndefined();
  expect((await script.auth.me()).user.id).toBe(user.id);
  const { deployment } = await script.deployments.create({ nodeId, customImage: "busybox:1.36" });
  expect((await script.deployments.list()).deployments.map((d) => d.id)).toEqual([deployment.id]);
  expect((await script.credits.balance()).balance).toBeDefined();

  // Outside its scopes, and key management: the API's 403, never a refresh or a sign-in error.
  const refusals = [script.operator.nodes(), script.auth.apiKeys.list(), script.auth.apiKeys.create({ name: "more", scopes: ["read"] })];
  for (const err of await Promise.all(refusals.map((p) => p.catch((e: unknown) => e)))) {
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 403, code: "INSUFFICIENT_SCOPE" });
  }

  // Deleted: refused at the next call, with no refresh tried.
  await wallet.auth.apiKeys.remove(apiKey.id);
  const gone = await script.deployments.list().catch((e: unknown) => e);
  expect(gone).toBeInstanceOf(ApiError);
  expect(gone).toMatchObject({ status: 401, code: "UNAUTHORIZED" });
  expect(gone).not.toBeInstanceOf(SessionError);
});
