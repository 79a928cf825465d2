import { type AddressInfo, createServer } from "node:net";
import { sqliteDatabase } from "@cm/testkit";
import bs58 from "bs58";
import nacl from "tweetnacl";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness, TestClock } from "../../../apps/control-plane/test/support/harness";
import { ApiError, createClient, keypairSigner, type LogEntry, MemorySessionStore, NetworkError, type Session, SessionError, WaitError } from "../src";
import { startFlakyProxy } from "./support/flaky-proxy";

// The SDK against a real control plane (SQLite, port 0) whose clock the test moves.

let h: Harness;
let clock: TestClock;
beforeAll(async () => {
  clock = new TestClock(Date.now());
  h = await startHarness(sqliteDatabase, { overrides: { clock }, config: { ACCESS_TOKEN_TTL_S: 600 } });
});
afterAll(() => h?.close());

const naclSigner = () => {
  const kp = nacl.sign.keyPair();
  return { publicKey: kp.publicKey, signMessage: async (m: Uint8Array) => nacl.sign.detached(m, kp.secretKey) };
};

describe("sign-in", () => {
  it("signs in with a tweetnacl keypair and with keypairSigner (WebCrypto)", async () => {
    for (const signer of [naclSigner(), await keypairSigner(nacl.sign.keyPair().secretKey)]) {
      const client = createClient({ baseUrl: h.url, now: clock.now });
      const { user } = await client.auth.signIn(signer);
      expect((await client.auth.me()).user).toEqual(user);
    }
  });

  it("signs in with a browser wallet's shape: a PublicKey object and { signature } answers", async () => {
    const kp = nacl.sign.keyPair();
    const wallet = {
      publicKey: { toBytes: () => kp.publicKey },
      signMessage: async (m: Uint8Array) => ({ signature: nacl.sign.detached(m, kp.secretKey) }),
    };
    const { user } = await createClient({ baseUrl: h.url, now: clock.now }).auth.signIn(wallet);
    expect(user.walletAddress).toBe(bs58.encode(kp.publicKey));
  });

  it("refuses a wrong signature with the API's code, status and request id", async () => {
    const signer = naclSigner();
    const err = await createClient({ baseUrl: h.url })
      .auth.signIn({ ...signer, signMessage: async () => new Uint8Array(64) })
      .catch((e) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ code: "INVALID_SIGNATURE", status: 401 });
    expect(err.requestId).toMatch(/^req_/);
  });
});

describe("sessions", () => {
  it("refreshes before the access token expires, and keeps the new pair in the store", async () => {
    const store = new MemorySessionStore();
    const client = createClient({ baseUrl: h.url, store, now: clock.now, refreshBeforeMs: 60_000 });
    await client.auth.signIn(naclSigner());
    const first = (await store.load())!;
    clock.advance(600_000 - 30_000);
    await client.credits.balance();
    const second = (await store.load())!;
    expect(second.refreshToken).not.toBe(first.refreshToken);
    expect(second.expiresAt).toBe(clock.now() + 600_000);
    expect(second.user).toEqual(first.user);
  });

  it("refreshes once when the API says TOKEN_EXPIRED, and retries the call", async () => {
    const store = new MemorySessionStore();
    // A client whose clock is behind the server's: it thinks the token is fresh.
    const client = createClient({ baseUrl: h.url, store, now: () => 0 });
    await client.auth.signIn(naclSigner());
    const before = (await store.load())!;
    clock.advance(601_000);
    expect((await client.auth.me()).user.id).toBe(before.user!.id);
    expect((await store.load())!.refreshToken).not.toBe(before.refreshToken);
  });

  it("says SESSION_EXPIRED and forgets the session when the refresh token is refused", async () => {
    const store = new MemorySessionStore({ accessToken: "cma_nope", refreshToken: "cmr_nope", expiresAt: 0 } as Session);
    const err = await createClient({ baseUrl: h.url, store })
      .credits.balance()
      .catch((e) => e);
    expect(err).toBeInstanceOf(SessionError);
    expect(err.code).toBe("SESSION_EXPIRED");
    expect(await store.load()).toBeUndefined();
  });

  it("says NOT_SIGNED_IN without asking the API", async () => {
    const err = await createClient({ baseUrl: "http://127.0.0.1:1" })
      .deployments.list()
      .catch((e) => e);
    expect(err).toBeInstanceOf(SessionError);
    expect(err.code).toBe("NOT_SIGNED_IN");
  });
});

describe("errors", () => {
  it("a network failure is a NetworkError, not an ApiError", async () => {
    const server = createServer();
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    const { port } = server.address() as AddressInfo;
    await new Promise((done) => server.close(done));
    const err = await createClient({ baseUrl: `http://127.0.0.1:${port}` })
      .nodes.list()
      .catch((e) => e);
    expect(err).toBeInstanceOf(NetworkError);
    expect(err).not.toBeInstanceOf(ApiError);
    expect(err.message).toBe(`cannot reach http://127.0.0.1:${port}/nodes: ECONNREFUSED`);
  });

  it("carries details: a validation error names its field", async () => {
    const err = await createClient({ baseUrl: h.url })
      .nodes.list({ region: "mars" as "eu-west" })
      .catch((e) => e);
    expect(err).toMatchObject({ code: "VALIDATION_ERROR", status: 400 });
    expect(JSON.stringify(err.details)).toContain("region");
  });
});

describe("deployments", () => {
  let client: ReturnType<typeof createClient>;
  let nodeId: string;
  beforeAll(async () => {
    client = createClient({ baseUrl: h.url, now: clock.now });
    const { user } = await client.auth.signIn(naclSigner());
    await h.grantCredits(user.id, 1_000);
    const operator = await h.signIn();
    nodeId = (await h.onlineNode(operator.token)).id;
  });

  it("waitFor resolves at the status, and says DEPLOYMENT_ENDED when it ends otherwise", async () => {
    const { deployment } = await client.deployments.create({ nodeId, customImage: "busybox:1.36" });
    expect((await client.deployments.waitFor(deployment.id, "pending", { intervalMs: 50 })).status).toBe("pending");
    const waiting = client.deployments.waitFor(deployment.id, "running", { intervalMs: 50 }).catch((e) => e);
    await client.deployments.stop(deployment.id);
    const err = await waiting;
    expect(err).toBeInstanceOf(WaitError);
    expect(err.code).toBe("DEPLOYMENT_ENDED");
    expect(err.deployment.status).toBe("stopped");
  });

  it("waitFor gives up with WAIT_TIMEOUT", async () => {
    const { deployment } = await client.deployments.create({ nodeId, customImage: "busybox:1.36" });
    const err = await client.deployments.waitFor(deployment.id, "running", { intervalMs: 50, timeoutMs: 300 }).catch((e) => e);
    expect(err).toMatchObject({ code: "WAIT_TIMEOUT" });
    await client.deployments.remove(deployment.id);
  });

  // intervalMs far past the test's timeout: only the events stream, not polling, can bring a change in time.
  it("watch yields the current state, then each change from the events stream, and ends when the deployment has", async () => {
    const { deployment } = await client.deployments.create({ nodeId, customImage: "busybox:1.36" });
    const seen: string[] = [];
    for await (const d of client.deployments.watch(deployment.id, { intervalMs: 600_000 })) {
      seen.push(d.status);
      if (d.status === "pending") await client.deployments.stop(deployment.id);
    }
    expect(seen).toEqual(["pending", "stopped"]);
  });

  it("watch keeps going across a control-plane restart: a change made meanwhile arrives on reconnect", async () => {
    const proxy = await startFlakyProxy(h.url);
    const store = new MemorySessionStore(await client.auth.session());
    const viaProxy = createClient({ baseUrl: proxy.url, store, now: clock.now });
    const { deployment } = await viaProxy.deployments.create({ nodeId, customImage: "busybox:1.36" });
    const seen: string[] = [];
    let restarted: Promise<void> | undefined;
    for await (const d of viaProxy.deployments.watch(deployment.id, { intervalMs: 600_000 })) {
      seen.push(d.status);
      // Stopped while the client cannot reach the control plane.
      restarted ??= proxy.restart(1_000);
      if (d.status === "pending") setTimeout(() => void client.deployments.stop(deployment.id), 200);
    }
    await restarted;
    await proxy.close();
    expect(seen).toEqual(["pending", "stopped"]);
  });

  it("watch says DEPLOYMENT_NOT_FOUND, as a read would, once the deployment is deleted", async () => {
    const { deployment } = await client.deployments.create({ nodeId, customImage: "busybox:1.36" });
    const seen: string[] = [];
    const err = await (async () => {
      for await (const d of client.deployments.watch(deployment.id, { intervalMs: 600_000 })) {
        seen.push(d.status);
        await client.deployments.remove(deployment.id);
      }
    })().catch((e) => e);
    expect(seen).toEqual(["pending"]);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ code: "DEPLOYMENT_NOT_FOUND", status: 404 });
  });

  it("follow yields the tail, then new lines once each (same instant included), and ends when the deployment has", async () => {
    const { deployment } = await client.deployments.create({ nodeId, customImage: "busybox:1.36" });
    const at = (s: number) => new Date(clock.now() + s * 1000).toISOString();
    let seq = 0;
    const add = (ts: string, ...messages: string[]) =>
      h.deps.repos.logIngest.append(
        deployment.id,
        messages.map((message) => ({ seq: ++seq, ts, tsMs: Date.parse(ts), stream: "stdout" as const, message })),
      );
    await add(at(0), "old-1", "old-2", "old-3");
    const seen: LogEntry[] = [];
    const following = (async () => {
      for await (const line of client.deployments.follow(deployment.id, { tail: 2, intervalMs: 50 })) {
        seen.push(line);
        if (line.message === "b") await add(at(1), "c", "d");
        if (line.message === "d") {
          await add(at(2), "e");
          await client.deployments.stop(deployment.id);
        }
      }
    })();
    await new Promise((r) => setTimeout(r, 300));
    await add(at(1), "a", "b");
    await following;
    expect(seen.map((l) => l.message)).toEqual(["old-2", "old-3", "a", "b", "c", "d", "e"]);
  });

  it("follow keeps going across a control-plane restart: no line lost or repeated", async () => {
    const proxy = await startFlakyProxy(h.url);
    const store = new MemorySessionStore(await client.auth.session());
    const viaProxy = createClient({ baseUrl: proxy.url, store, now: clock.now });
    const { deployment } = await viaProxy.deployments.create({ nodeId, customImage: "busybox:1.36" });
    let seq = 0;
    const add = (...messages: string[]) => {
      const ts = new Date().toISOString();
      return h.deps.repos.logIngest.append(
        deployment.id,
        messages.map((message) => ({ seq: ++seq, ts, tsMs: Date.parse(ts), stream: "stdout" as const, message })),
      );
    };
    await add("1", "2");
    const seen: string[] = [];
    const following = (async () => {
      for await (const line of viaProxy.deployments.follow(deployment.id, { intervalMs: 50 })) seen.push(line.message);
    })();
    const until = async (n: number) => {
      while (seen.length < n) await new Promise((r) => setTimeout(r, 20));
    };
    await until(2);
    const restarting = proxy.restart(1_000);
    await add("3", "4");
    await restarting;
    await add("5");
    await until(5);
    await client.deployments.stop(deployment.id);
    await following;
    await proxy.close();
    expect(seen).toEqual(["1", "2", "3", "4", "5"]);
  });
});
