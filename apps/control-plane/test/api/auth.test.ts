import { describeEachDatabase, sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, newWallet, startHarness } from "../support/harness";

describeEachDatabase("auth on $name", (db) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(db, { config: { PUBLIC_DOMAIN: "market.example" } });
  });
  afterAll(() => h.close());

  it("issues a message with the domain first, the abbreviated wallet, the nonce and a timestamp, each on its own line", async () => {
    const w = newWallet();
    const r = await h.call("POST", "/auth/nonce", { body: { walletAddress: w.address } });
    expect(r.status).toBe(200);
    const lines: string[] = r.json.message.split("\n");
    expect(lines[0]).toContain("market.example");
    expect(lines).toContain(`${w.address.slice(0, 4)}…${w.address.slice(-4)}`);
    expect(lines.some((l) => l.includes(r.json.nonce))).toBe(true);
    expect(lines.some((l) => /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/.test(l))).toBe(true);
    expect(r.json.nonce).toMatch(/^[0-9a-f]{32}$/);
    expect(r.json.expiresAt).toBe(h.clock.now() + 5 * 60 * 1000);
  });

  it("signs in with a real ed25519 signature, creating the user once", async () => {
    const w = newWallet();
    const first = await h.signIn(w);
    expect(first.user.walletAddress).toBe(w.address);
    expect(first.user.isOperator).toBe(false);
    const again = await h.signIn(w);
    expect(again.user.id).toBe(first.user.id);
    const me = await h.call("GET", "/auth/me", { token: again.token });
    expect(me.status).toBe(200);
    expect(me.json.user).toMatchObject({ id: first.user.id, walletAddress: w.address, isOperator: false });
    expect(Date.parse(me.json.user.createdAt)).toBe(h.clock.now());
  });

  it("refuses malformed wallets with INVALID_WALLET_ADDRESS", async () => {
    for (const walletAddress of ["abc", "0OIl0OIl0OIl0OIl0OIl0OIl0OIl0OIl", "1".repeat(44) + "x", ""]) {
      const r = await h.call("POST", "/auth/nonce", { body: { walletAddress } });
      expect(r.status).toBe(400);
      expect(r.json.error.code).toBe("INVALID_WALLET_ADDRESS");
    }
  });

  it("refuses a signature by another key, a garbled one, and a short one with INVALID_SIGNATURE", async () => {
    const w = newWallet();
    const other = newWallet();
    const n = await h.call("POST", "/auth/nonce", { body: { walletAddress: w.address } });
    for (const signature of [other.sign(n.json.message), "not base64!!", Buffer.alloc(63).toString("base64"), w.sign(n.json.message + " ")]) {
      const r = await h.call("POST", "/auth/verify", { body: { walletAddress: w.address, message: n.json.message, signature } });
      expect(r.status).toBe(401);
      expect(r.json.error.code).toBe("INVALID_SIGNATURE");
    }
    // A refused attempt did not burn the nonce: the owner can still sign in with it.
    const ok = await h.call("POST", "/auth/verify", { body: { walletAddress: w.address, message: n.json.message, signature: w.sign(n.json.message) } });
    expect(ok.status).toBe(200);
  });

  it("refuses a message past its expiry with NONCE_EXPIRED", async () => {
    const w = newWallet();
    const n = await h.call("POST", "/auth/nonce", { body: { walletAddress: w.address } });
    h.clock.advance(5 * 60 * 1000 + 1);
    const r = await h.call("POST", "/auth/verify", { body: { walletAddress: w.address, message: n.json.message, signature: w.sign(n.json.message) } });
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe("NONCE_EXPIRED");
  });

  it("lets a message through once: a replay fails, and of ten racing verifies exactly one succeeds", async () => {
    const w = newWallet();
    const n = await h.call("POST", "/auth/nonce", { body: { walletAddress: w.address } });
    const body = { walletAddress: w.address, message: n.json.message, signature: w.sign(n.json.message) };
    const raced = await Promise.all(Array.from({ length: 10 }, () => h.call("POST", "/auth/verify", { body })));
    expect(raced.filter((r) => r.status === 200)).toHaveLength(1);
    for (const r of raced.filter((r) => r.status !== 200)) expect(r.json.error.code).toBe("NONCE_NOT_FOUND");
    const replay = await h.call("POST", "/auth/verify", { body });
    expect(replay.status).toBe(400);
    expect(replay.json.error.code).toBe("NONCE_NOT_FOUND");
  });

  it("refuses a message issued to another wallet, or never issued", async () => {
    const a = newWallet();
    const b = newWallet();
    const n = await h.call("POST", "/auth/nonce", { body: { walletAddress: a.address } });
    const r = await h.call("POST", "/auth/verify", { body: { walletAddress: b.address, message: n.json.message, signature: b.sign(n.json.message) } });
    expect(r.json.error.code).toBe("NONCE_NOT_FOUND");
    const forged = "market.example wants you to sign in\nnonce: 00";
    const f = await h.call("POST", "/auth/verify", { body: { walletAddress: a.address, message: forged, signature: a.sign(forged) } });
    expect(f.json.error.code).toBe("NONCE_NOT_FOUND");
  });

  it("expires access tokens after 15 minutes with TOKEN_EXPIRED", async () => {
    const s = await h.signIn();
    h.clock.advance(15 * 60 * 1000 - 1);
    expect((await h.call("GET", "/auth/me", { token: s.token })).status).toBe(200);
    h.clock.advance(1);
    const r = await h.call("GET", "/auth/me", { token: s.token });
    expect(r.status).toBe(401);
    expect(r.json.error.code).toBe("TOKEN_EXPIRED");
  });

  it("rotates refresh tokens, and a reused one revokes the whole family", async () => {
    const s = await h.signIn();
    const r1 = await h.call("POST", "/auth/refresh", { body: { refreshToken: s.refreshToken } });
    expect(r1.status).toBe(200);
    expect(r1.json.refreshToken).not.toBe(s.refreshToken);
    expect(r1.json.expiresAt).toBe(h.clock.now() + 15 * 60 * 1000);
    expect((await h.call("GET", "/auth/me", { token: r1.json.accessToken })).status).toBe(200);

    const reuse = await h.call("POST", "/auth/refresh", { body: { refreshToken: s.refreshToken } });
    expect(reuse.status).toBe(401);
    expect(reuse.json.error.code).toBe("INVALID_REFRESH_TOKEN");
    // The thief's use is detected: the legitimate holder's newer tokens die too.
    expect((await h.call("POST", "/auth/refresh", { body: { refreshToken: r1.json.refreshToken } })).json.error.code).toBe("INVALID_REFRESH_TOKEN");
    expect((await h.call("GET", "/auth/me", { token: r1.json.accessToken })).json.error.code).toBe("UNAUTHORIZED");
  });

  it("refuses unknown refresh tokens", async () => {
    const r = await h.call("POST", "/auth/refresh", { body: { refreshToken: "cmr_nope" } });
    expect(r.status).toBe(401);
    expect(r.json.error.code).toBe("INVALID_REFRESH_TOKEN");
  });

  it("answers 401 in the error shape for a missing, malformed or unknown token on every protected route", async () => {
    const routes: Array<[string, string]> = [
      ["GET", "/auth/me"],
      ["GET", "/deployments"],
      ["POST", "/deployments"],
      ["GET", "/deployments/dep_x"],
      ["POST", "/deployments/dep_x/start"],
      ["POST", "/deployments/dep_x/stop"],
      ["DELETE", "/deployments/dep_x"],
      ["GET", "/deployments/dep_x/logs"],
      ["GET", "/operator/nodes"],
      ["POST", "/operator/nodes"],
      ["DELETE", "/operator/nodes/node_x"],
    ];
    for (const [method, path] of routes) {
      for (const headers of [{}, { authorization: "Basic abc" }, { authorization: "Bearer" }, { authorization: "Bearer cma_unknown" }] as Array<
        Record<string, string>
      >) {
        const r = await h.call(method, path, { headers });
        expect(r.status, `${method} ${path} ${JSON.stringify(headers)}`).toBe(401);
        expect(r.json.error.code).toBe("UNAUTHORIZED");
        expect(r.json.error.requestId).toBe(r.headers.get("x-request-id"));
      }
    }
  });
});

describe("auth rate limit", () => {
  it("answers 429 with Retry-After past the limit", async () => {
    const h = await startHarness(sqliteDatabase, { config: { AUTH_RATE_LIMIT_PER_MIN: 5 } });
    try {
      const w = newWallet();
      const codes: number[] = [];
      let last: Awaited<ReturnType<typeof h.call>> | undefined;
      for (let i = 0; i < 7; i++) {
        last = await h.call("POST", "/auth/nonce", { body: { walletAddress: w.address } });
        codes.push(last.status);
      }
      expect(codes).toEqual([200, 200, 200, 200, 200, 429, 429]);
      expect(last!.json.error.code).toBe("RATE_LIMITED");
      expect(Number(last!.headers.get("retry-after"))).toBeGreaterThan(0);
      h.clock.advance(60_000);
      expect((await h.call("POST", "/auth/nonce", { body: { walletAddress: w.address } })).status).toBe(200);
      // Catalogue routes are not limited.
      expect((await h.call("GET", "/templates")).status).toBe(200);
    } finally {
      await h.close();
    }
  });

  it("never limits reading /auth/me: only sign-in and refresh count", async () => {
    const limited = await startHarness(sqliteDatabase, { config: { AUTH_RATE_LIMIT_PER_MIN: 3 } });
    try {
      const user = await limited.signIn(); // nonce + verify: 2 of 3
      const reads = await Promise.all(Array.from({ length: 20 }, () => limited.call("GET", "/auth/me", { token: user.token })));
      expect(reads.map((r) => r.status)).toEqual(Array(20).fill(200));
      expect((await limited.call("POST", "/auth/nonce", { body: { walletAddress: newWallet().address } })).status).toBe(200);
      expect((await limited.call("POST", "/auth/nonce", { body: { walletAddress: newWallet().address } })).status).toBe(429);
    } finally {
      await limited.close();
    }
  });

  it("tells clients apart behind a trusted proxy by X-Forwarded-For, and believes nobody else's", async () => {
    const nonce = (h: Harness, forwardedFor: string) =>
      h.call("POST", "/auth/nonce", { body: { walletAddress: newWallet().address }, headers: { "x-forwarded-for": forwardedFor } });
    const behindProxy = await startHarness(sqliteDatabase, { config: { AUTH_RATE_LIMIT_PER_MIN: 2, TRUSTED_PROXIES: "127.0.0.1, ::1" } });
    try {
      // The test's requests come from 127.0.0.1, here the proxy: each forwarded client has its own window.
      expect([
        (await nonce(behindProxy, "203.0.113.5")).status,
        (await nonce(behindProxy, "203.0.113.5")).status,
        (await nonce(behindProxy, "203.0.113.5")).status,
      ]).toEqual([200, 200, 429]);
      expect((await nonce(behindProxy, "203.0.113.6")).status).toBe(200);
      // A client cannot escape its window by sending its own X-Forwarded-For: the proxy appends the real address last.
      expect((await nonce(behindProxy, "198.51.100.1, 203.0.113.5")).status).toBe(429);
    } finally {
      await behindProxy.close();
    }
    const direct = await startHarness(sqliteDatabase, { config: { AUTH_RATE_LIMIT_PER_MIN: 2 } });
    try {
      // No trusted proxy: the header is the client's own say-so and changes nothing.
      expect([(await nonce(direct, "203.0.113.7")).status, (await nonce(direct, "203.0.113.8")).status, (await nonce(direct, "203.0.113.9")).status]).toEqual([
        200, 200, 429,
      ]);
    } finally {
      await direct.close();
    }
  });
});
