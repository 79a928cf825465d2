// API keys for scripts: created by a signed-in wallet, shown once, stored as
// their SHA-256, sent as a bearer on the routes their scopes allow. A real
// control plane on a real socket, over both databases.
import { Writable } from "node:stream";
import { API_KEY_PREFIX, API_KEY_SCOPES, API_KEYS_MAX, type ApiKeyScope } from "@cm/protocol";
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { hashSecret } from "../../src/services/ids";
import { createLogger } from "../../src/services/logger";
import { type Harness, startHarness, TestClock } from "../support/harness";
import { openSse, until } from "./support/sse-client";

type Tenant = Awaited<ReturnType<Harness["signIn"]>>;
type DocOperation = { operationId: string; security?: Array<Record<string, string[]>>; "x-scope"?: string; requestBody?: unknown };

describeEachDatabase("API keys on $name", (db) => {
  let h: Harness;
  let clock: TestClock;
  let tenant: Tenant;
  let nodeId: string;
  /** Every line the control plane logged, at its most verbose. */
  const logged: string[] = [];

  beforeAll(async () => {
    clock = new TestClock(Date.now());
    const sink = new Writable({
      write(chunk, _enc, done) {
        logged.push(String(chunk));
        done();
      },
    });
    h = await startHarness(db, {
      overrides: { clock, log: createLogger("debug", "control-plane", sink) },
      config: { REVOCATION_CHECK_MS: 50, MAX_STREAMS_PER_ACCOUNT: 3 },
    });
    tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 1_000);
    nodeId = (await h.onlineNode((await h.signIn()).token, { maxDeployments: 50 })).id;
  });
  afterAll(() => h.close());

  async function createKey(scopes: readonly ApiKeyScope[], o: { name?: string; expiresInS?: number; owner?: Tenant } = {}) {
    const r = await h.call("POST", "/auth/api-keys", {
      token: (o.owner ?? tenant).token,
      body: { name: o.name ?? `key ${scopes.join("+")}`, scopes, ...(o.expiresInS ? { expiresInS: o.expiresInS } : {}) },
    });
    expect(r.status, r.text).toBe(201);
    return { key: r.json.key as string, id: r.json.apiKey.id as string, answer: r.json };
  }

  it("answers the key once, with a cmk_ prefix; lists it without the key; a key cannot manage keys", async () => {
    const { key, answer } = await createKey(["read", "deploy"], { name: "ci deploys", expiresInS: 3600 });
    expect(key).toMatch(/^cmk_[A-Za-z0-9_-]{43}$/);
    expect(answer.apiKey).toEqual({
      id: expect.stringMatching(/^key_/),
      name: "ci deploys",
      prefix: key.slice(0, 12),
      scopes: ["read", "deploy"],
      createdAt: new Date(clock.now()).toISOString(),
      lastUsedAt: null,
      expiresAt: new Date(clock.now() + 3_600_000).toISOString(),
    });
    const list = await h.call("GET", "/auth/api-keys", { token: tenant.token });
    expect(list.json.apiKeys).toContainEqual(answer.apiKey);
    expect(list.text).not.toContain(key);
    expect(list.text).not.toContain(hashSecret(key));

    // A key, whatever its scopes, cannot create, list or delete keys: a leaked one cannot mint more or hide itself.
    const all = await createKey(API_KEY_SCOPES);
    for (const [method, path, body] of [
      ["POST", "/auth/api-keys", { name: "x", scopes: ["read"] }],
      ["GET", "/auth/api-keys", undefined],
      ["DELETE", `/auth/api-keys/${answer.apiKey.id}`, undefined],
    ] as const) {
      const r = await h.call(method, path, { token: all.key, ...(body ? { body } : {}) });
      expect([r.status, r.json.error.code, r.json.error.details.requiredScope], `${method} ${path}`).toEqual([403, "INSUFFICIENT_SCOPE", "session"]);
    }
    // Any key may ask whose it is; a use shows in the listing.
    const me = await h.call("GET", "/auth/me", { token: key });
    expect(me.json.user.id).toBe(tenant.user.id);
    const after = await h.call("GET", "/auth/api-keys", { token: tenant.token });
    expect(after.json.apiKeys.find((k: { id: string }) => k.id === answer.apiKey.id).lastUsedAt).toBe(new Date(clock.now()).toISOString());
  });

  it("lets a key through every operation its scope allows and refuses it (403 naming the scope) where it does not, over the whole document", async () => {
    const doc = (await h.call("GET", "/openapi.json")).json;
    expect(doc.components.securitySchemes.bearer.description).toContain("API key");
    const ops = Object.entries(doc.paths as Record<string, Record<string, DocOperation>>).flatMap(([path, item]) =>
      Object.entries(item).map(([method, op]) => ({ method, path, op, scope: op["x-scope"] })),
    );
    // Every operation that needs a bearer says which scope, in x-scope.
    for (const { method, path, op, scope } of ops) {
      if (!op.security?.length) {
        expect(scope, `${method} ${path}`).toBeUndefined();
        continue;
      }
      expect(op.security, `${method} ${path}`).toEqual([{ bearer: [] }]);
      expect([...API_KEY_SCOPES, "any", "session"], `${method} ${path}`).toContain(scope);
    }
    // Only key management is a wallet session's alone: a route left out of ROUTE_SCOPES would show here.
    expect(
      ops
        .filter((o) => o.scope === "session")
        .map((o) => o.op.operationId)
        .sort(),
    ).toEqual(["createApiKey", "deleteApiKey", "listApiKeys"]);
    // The words, route by route.
    const scopeOf = Object.fromEntries(ops.map((o) => [o.op.operationId, o.scope]));
    expect(scopeOf).toMatchObject({
      listDeployments: "read",
      getDeployment: "read",
      getDeploymentLogs: "read",
      streamDeploymentLogs: "read",
      getBalance: "read",
      createDeployment: "deploy",
      startDeployment: "deploy",
      stopDeployment: "deploy",
      deleteDeployment: "deploy",
      execInDeployment: "deploy",
      connectToDeploymentTcpPort: "deploy",
      registerNode: "operator",
      listOperatorNodes: "operator",
      getOperatorEarnings: "operator",
      requestPayout: "payouts",
    });

    const keys = Object.fromEntries(
      await Promise.all(
        API_KEY_SCOPES.map(async (s) => [s, { with: (await createKey([s])).key, without: (await createKey(API_KEY_SCOPES.filter((x) => x !== s))).key }]),
      ),
    ) as Record<ApiKeyScope, { with: string; without: string }>;
    const scoped = ops.filter((o): o is typeof o & { scope: ApiKeyScope } => API_KEY_SCOPES.includes(o.scope as ApiKeyScope));
    expect(scoped.length).toBeGreaterThan(30);
    for (const { method, path, op, scope } of scoped) {
      // Ids nobody holds: what answers is the route behind the auth layer (404, 400, 426), and nothing changes.
      const url = path.replace(/\{port\}/g, "8080").replace(/\{[^}]+\}/g, "nope");
      const send = (token: string) => h.call(method.toUpperCase(), url, { token, ...(op.requestBody ? { body: {} } : {}) });
      const allowed = await send(keys[scope].with);
      expect([401, 403], `${method} ${path} with ${scope}: ${allowed.text}`).not.toContain(allowed.status);
      const refused = await send(keys[scope].without);
      expect([refused.status, refused.json?.error?.code, refused.json?.error?.details?.requiredScope], `${method} ${path} without ${scope}`).toEqual([
        403,
        "INSUFFICIENT_SCOPE",
        scope,
      ]);
      expect(op.security).toBeDefined();
    }
  });

  it("is refused at once when deleted, and what it opened ends; signing out does not end it", async () => {
    const signedIn = await h.signIn();
    await h.grantCredits(signedIn.user.id, 1_000);
    const { key, id } = await createKey(["read", "deploy"], { owner: signedIn });
    const dep = await h.call("POST", "/deployments", { token: key, body: { nodeId, customImage: "busybox:1.36" } });
    expect(dep.status, dep.text).toBe(201);
    expect((await h.call("POST", "/auth/logout", { body: { refreshToken: signedIn.refreshToken } })).status).toBe(200);
    expect((await h.call("GET", "/deployments", { token: signedIn.token })).status).toBe(401);
    expect((await h.call("GET", "/deployments", { token: key })).status).toBe(200);

    const stream = await openSse(`${h.url}/deployments/${dep.json.deployment.id}/events`, key);
    expect(stream.res.status).toBe(200);
    await until("the first event", () => stream.events.length > 0);
    // Another account cannot delete it.
    const other = await h.signIn();
    expect((await h.call("DELETE", `/auth/api-keys/${id}`, { token: other.token })).json.error.code).toBe("API_KEY_NOT_FOUND");

    const fresh = await h.signIn(signedIn.wallet);
    expect((await h.call("DELETE", `/auth/api-keys/${id}`, { token: fresh.token })).status).toBe(200);
    const after = await h.call("GET", "/deployments", { token: key });
    expect([after.status, after.json.error.code]).toEqual([401, "UNAUTHORIZED"]);
    await stream.done;
    expect(stream.events.find((e) => e.event === "error")?.data).toContain("UNAUTHORIZED");
    expect((await h.call("DELETE", `/auth/api-keys/${id}`, { token: fresh.token })).json.error.code).toBe("API_KEY_NOT_FOUND");
  });

  it("ends a stream it opened when the database says it is gone, as another replica's delete writes it", async () => {
    const { key, id } = await createKey(["read", "deploy"]);
    const dep = await h.call("POST", "/deployments", { token: key, body: { nodeId, customImage: "busybox:1.36" } });
    const stream = await openSse(`${h.url}/deployments/${dep.json.deployment.id}/logs/stream`, key);
    expect(stream.res.status).toBe(200);
    expect(await h.deps.repos.auth.apiKeys.remove(id, tenant.user.id)).toBeDefined();
    await stream.done;
    expect(stream.events.find((e) => e.event === "error")?.data).toContain("UNAUTHORIZED");
  });

  it("stops working at its expiry, and a stream it opened ends then", async () => {
    const { key } = await createKey(["read", "deploy"], { expiresInS: 120 });
    const dep = await h.call("POST", "/deployments", { token: key, body: { nodeId, customImage: "busybox:1.36" } });
    const stream = await openSse(`${h.url}/deployments/${dep.json.deployment.id}/events`, key);
    expect(stream.res.status).toBe(200);
    clock.advance(119_000);
    expect((await h.call("GET", "/deployments", { token: key })).status).toBe(200);
    clock.advance(1_000);
    const r = await h.call("GET", "/deployments", { token: key });
    expect([r.status, r.json.error.code]).toEqual([401, "API_KEY_EXPIRED"]);
    await stream.done;
    expect(stream.events.find((e) => e.event === "error")?.data).toContain("API_KEY_EXPIRED");
    // Still listed, with its expiry, until deleted.
    const list = await h.call("GET", "/auth/api-keys", { token: (await h.signIn(tenant.wallet)).token });
    expect(list.json.apiKeys.map((k: { prefix: string }) => k.prefix)).toContain(key.slice(0, 12));
  });

  it("counts a key's use against its account's limits, as the wallet's own", async () => {
    const owner = await h.signIn();
    await h.grantCredits(owner.user.id, 1_000);
    const { key } = await createKey(["read", "deploy"], { owner });
    const id = (await h.call("POST", "/deployments", { token: owner.token, body: { nodeId, customImage: "busybox:1.36" } })).json.deployment.id;
    // The account may hold 3 streams (MAX_STREAMS_PER_ACCOUNT): two with the session, one with the key, and the key's next is refused.
    const open = [
      await openSse(`${h.url}/deployments/${id}/events`, owner.token),
      await openSse(`${h.url}/deployments/${id}/events`, owner.token),
      await openSse(`${h.url}/deployments/${id}/events`, key),
    ];
    for (const s of open) expect(s.res.status).toBe(200);
    const past = await h.call("GET", `/deployments/${id}/events`, { token: key });
    expect([past.status, past.json.error.code]).toEqual([429, "RATE_LIMITED"]);
    expect(past.json.error.message).toContain("this account has 3 streams open");
    for (const s of open) s.close();
  });

  it("refuses bad requests in the one error shape: no scopes, an unknown scope, a repeated one, an expiry under a minute, a blank name", async () => {
    for (const body of [
      { name: "x", scopes: [] },
      { name: "x", scopes: ["admin"] },
      { name: "x", scopes: ["read", "read"] },
      { name: "x", scopes: ["read"], expiresInS: 10 },
      { name: "x", scopes: ["read"], expiresInS: 10 ** 9 },
      { name: " ", scopes: ["read"] },
      { name: "x", scopes: ["read"], key: "cmk_mine" },
    ]) {
      const r = await h.call("POST", "/auth/api-keys", { token: tenant.token, body });
      expect([r.status, r.json.error.code], JSON.stringify(body)).toEqual([400, "VALIDATION_ERROR"]);
    }
    for (const bad of ["cmk_", "cmk_nope", `${API_KEY_PREFIX}${"A".repeat(43)}`]) {
      const r = await h.call("GET", "/deployments", { token: bad });
      expect([r.status, r.json.error.code]).toEqual([401, "UNAUTHORIZED"]);
    }
  });

  it("holds at most API_KEYS_MAX keys per account", async () => {
    const owner = await h.signIn();
    for (let i = 0; i < API_KEYS_MAX; i++) await createKey(["read"], { owner });
    const r = await h.call("POST", "/auth/api-keys", { token: owner.token, body: { name: "one more", scopes: ["read"] } });
    expect([r.status, r.json.error.code]).toEqual([403, "API_KEY_QUOTA_EXCEEDED"]);
  });

  it("keeps only the key's hash: no table holds the key, and no line logged holds it", async () => {
    const { key, id } = await createKey(["read", "deploy"], { name: "at rest" });
    // Uses that succeed, fail, and are refused, so that every path a key takes has run.
    await h.call("GET", "/deployments", { token: key });
    await h.call("POST", "/deployments", { token: key, body: { nodeId, customImage: "busybox:1.36" } });
    await h.call("GET", "/operator/nodes", { token: key });
    await h.call("GET", "/deployments/nope/logs", { token: key });
    await h.call("GET", "/deployments", { token: `${key}x` });
    const tables = h.deps.repos.handle.t as unknown as Record<string, Parameters<typeof selectAll>[1]>;
    const dumpAll = async () => {
      let dump = "";
      for (const table of Object.values(tables)) dump += JSON.stringify(await selectAll(h, table));
      return dump;
    };
    const held = await dumpAll();
    expect(held).toContain(hashSecret(key));
    expect(held).toContain(key.slice(0, 12));
    expect(held).not.toContain(key.slice(12));
    await h.call("GET", "/deployments", { headers: { authorization: `Token ${key}` } });
    await h.call("DELETE", `/auth/api-keys/${id}`, { token: tenant.token });
    await h.call("GET", "/deployments", { token: key });

    expect(await dumpAll()).not.toContain(key.slice(12));

    const log = logged.join("");
    // The audit lines name the key by its id and shown prefix.
    expect(log).toContain(`"prefix":"${key.slice(0, 12)}"`);
    expect(log).toContain("API key deleted");
    expect(log).not.toContain(key.slice(12));
  });
});

function selectAll(h: Harness, table: never): Promise<unknown[]> {
  return h.deps.repos.handle.run((db) => (db as unknown as { select(): { from(t: never): Promise<unknown[]> } }).select().from(table));
}
