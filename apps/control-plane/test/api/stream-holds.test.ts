// Who may hold a log or events stream, and for how long: a stream ends with the
// sign-in that opened it (an `error` event in the API's error shape, then the
// end), and one account (or one deployment) holds only so many at once. A real
// control plane on a real socket, tenants signed in with ed25519 keys.
import { describeEachDatabase, sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashSecret } from "../../src/services/ids";
import { type Harness, startHarness, TestClock } from "../support/harness";
import { openSse, until } from "./support/sse-client";

type Tenant = Awaited<ReturnType<Harness["signIn"]>>;
const STREAMS = ["logs/stream", "events"] as const;

/** The `error` event a stream ended with, as a client reads it. */
const errorOf = (events: Array<{ event?: string; data?: string }>) => {
  const e = events.find((x) => x.event === "error");
  return e ? JSON.parse(e.data!).error : undefined;
};

// On both databases: another replica's revocation is read from the sessions table.
describeEachDatabase("streams end with the sign-in that opened them, on $name", (db) => {
  let h: Harness;
  let clock: TestClock;
  let nodeId: string;
  beforeAll(async () => {
    clock = new TestClock(Date.now());
    h = await startHarness(db, { overrides: { clock }, config: { REVOCATION_CHECK_MS: 50, ACCESS_TOKEN_TTL_S: 600 } });
    nodeId = (await h.onlineNode((await h.signIn()).token, { maxDeployments: 50 })).id;
  });
  afterAll(() => h.close());

  async function tenantWithDeployment() {
    const tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 1_000);
    const r = await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId, customImage: "busybox:1.36" } });
    return { tenant, id: r.json.deployment.id as string };
  }
  const open = (tenant: Tenant, id: string, path: string) => openSse(`${h.url}/deployments/${id}/${path}`, tenant.token);

  it("ends every stream at sign-out with an error event UNAUTHORIZED, then the end; another sign-in's streams go on", async () => {
    const { tenant, id } = await tenantWithDeployment();
    const other = await h.signIn(tenant.wallet);
    const streams = await Promise.all(STREAMS.map((p) => open(tenant, id, p)));
    const others = await Promise.all(STREAMS.map((p) => open(other, id, p)));
    for (const s of [...streams, ...others]) expect(s.res.status).toBe(200);
    await until("the first events", () => [...streams, ...others].every((s) => s.events.length > 0));

    expect((await h.call("POST", "/auth/logout", { body: { refreshToken: tenant.refreshToken } })).status).toBe(200);
    for (const s of streams) {
      await s.done;
      expect(s.events.at(-1)).toMatchObject({ event: "error" });
      expect(errorOf(s.events)).toEqual({ code: "UNAUTHORIZED", message: expect.stringContaining("sign in again"), requestId: expect.any(String) });
    }
    // The same wallet's other sign-in is another family: its streams are still open.
    await h.call("POST", `/deployments/${id}/stop`, { token: other.token });
    for (const s of others) {
      await s.done;
      expect(s.events.at(-1)).toMatchObject({ event: "end" });
    }
  });

  it("ends the streams when a refresh token is used twice", async () => {
    const { tenant, id } = await tenantWithDeployment();
    const s = await open(tenant, id, "logs/stream");
    await h.call("POST", "/auth/refresh", { body: { refreshToken: tenant.refreshToken } });
    await h.call("POST", "/auth/refresh", { body: { refreshToken: tenant.refreshToken } });
    await s.done;
    expect(errorOf(s.events)).toMatchObject({ code: "UNAUTHORIZED" });
  });

  it("ends the streams when the database says the token was revoked, as another replica's sign-out writes it", async () => {
    const { tenant, id } = await tenantWithDeployment();
    const streams = await Promise.all(STREAMS.map((p) => open(tenant, id, p)));
    await h.deps.repos.auth.revokeFamily(hashSecret(tenant.refreshToken), clock.now());
    for (const s of streams) {
      await s.done;
      expect(errorOf(s.events)).toMatchObject({ code: "UNAUTHORIZED" });
    }
  });

  it("ends the streams when their access token expires (TOKEN_EXPIRED); a fresh token resumes after the last event", async () => {
    const { tenant, id } = await tenantWithDeployment();
    const ts = new Date().toISOString();
    await h.deps.repos.logIngest.append(id, [{ seq: 1, ts, tsMs: Date.parse(ts), stream: "stdout", message: "one" }]);
    const streams = await Promise.all(STREAMS.map((p) => open(tenant, id, p)));
    await until("the first events", () => streams.every((s) => s.events.some((e) => e.data)));
    clock.advance(601_000);
    for (const s of streams) {
      await s.done;
      expect(s.events.at(-1)).toMatchObject({ event: "error" });
      expect(errorOf(s.events)).toMatchObject({ code: "TOKEN_EXPIRED", message: expect.stringContaining("refresh") });
    }
    const fresh = await h.call("POST", "/auth/refresh", { body: { refreshToken: tenant.refreshToken } });
    await h.deps.repos.logIngest.append(id, [{ seq: 2, ts, tsMs: Date.parse(ts), stream: "stdout", message: "two" }]);
    const again = await openSse(`${h.url}/deployments/${id}/logs/stream`, fresh.json.accessToken, { "last-event-id": "1" });
    await until("the next line", () => again.events.some((e) => e.data));
    expect(again.events.filter((e) => e.data).map((e) => JSON.parse(e.data!).message)).toEqual(["two"]);
    again.close();
  });
});

describe("caps on open streams", () => {
  let h: Harness;
  let nodeId: string;
  beforeAll(async () => {
    h = await startHarness(sqliteDatabase, {
      overrides: { clock: new TestClock(Date.now()) },
      config: { MAX_STREAMS_PER_ACCOUNT: 3, MAX_STREAMS_PER_DEPLOYMENT: 2 },
    });
    nodeId = (await h.onlineNode((await h.signIn()).token, { maxDeployments: 50 })).id;
  });
  afterAll(() => h.close());

  async function deploy(tenant: Tenant) {
    const r = await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId, customImage: "busybox:1.36" } });
    return r.json.deployment.id as string;
  }
  const open = (tenant: Tenant, id: string, path: (typeof STREAMS)[number] = "logs/stream") => openSse(`${h.url}/deployments/${id}/${path}`, tenant.token);

  it("refuses a stream past the deployment's cap and past the account's with RATE_LIMITED and Retry-After, and takes one again once a stream closed", async () => {
    const tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 1_000);
    const [a, b, c] = [await deploy(tenant), await deploy(tenant), await deploy(tenant)];
    const held = [await open(tenant, a), await open(tenant, a, "events")];
    for (const s of held) expect(s.res.status).toBe(200);

    const overDeployment = await open(tenant, a);
    expect(overDeployment.res.status).toBe(429);
    expect(overDeployment.res.headers.get("retry-after")).toBe("5");
    await overDeployment.done;
    expect(JSON.parse((await h.call("GET", `/deployments/${a}/events`, { token: tenant.token })).text).error).toMatchObject({
      code: "RATE_LIMITED",
      details: { limit: 2 },
    });

    held.push(await open(tenant, b));
    expect(held[2]!.res.status).toBe(200);
    const overAccount = await h.call("GET", `/deployments/${c}/logs/stream`, { token: tenant.token });
    expect(overAccount.status).toBe(429);
    expect(overAccount.json.error).toMatchObject({
      code: "RATE_LIMITED",
      message: expect.stringContaining("this account has 3 streams open"),
      details: { limit: 3 },
    });

    // Another account is not held back by this one's streams.
    const other = await h.signIn();
    await h.grantCredits(other.user.id, 1_000);
    const theirs = await open(other, await deploy(other));
    expect(theirs.res.status).toBe(200);
    theirs.close();

    // A closed stream gives its slot back.
    held[0]!.close();
    await until("a slot free again", () => h.deps.streams.streamsOfAccount(tenant.user.id) === 2);
    const next = await open(tenant, c);
    expect(next.res.status).toBe(200);
    // A stream that ended by itself (the deployment stopped) gives its slot back too.
    await h.call("POST", `/deployments/${c}/stop`, { token: tenant.token });
    await next.done;
    await until("the ended stream's slot free", () => h.deps.streams.streamsOfAccount(tenant.user.id) === 2);
    for (const s of held) s.close();
    await until("every slot free", () => h.deps.streams.streamsOfAccount(tenant.user.id) === 0 && h.deps.grants.size === 0);
  });
});
