import { type DepositRefusalCode, ERROR_CODES } from "@cm/protocol";
import { describeEachDatabase, sqliteDatabase } from "@cm/testkit";
import { Keypair } from "@solana/web3.js";
import bs58 from "bs58";
import nacl from "tweetnacl";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { checkWholeBooks } from "../support/books";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../support/fake-solana-rpc";
import { type Harness, startHarness, type Wallet } from "../support/harness";
import { makeUsdcPayment, type PaymentOptions, USDC_MINT } from "../support/solana-fixtures";

/** The tenant's Solana keypair doubles as its sign-in wallet, as a real wallet does. */
function walletOf(kp: Keypair): Wallet {
  return {
    address: kp.publicKey.toBase58(),
    secretKey: kp.secretKey,
    sign: (m) => Buffer.from(nacl.sign.detached(new TextEncoder().encode(m), kp.secretKey)).toString("base64"),
  };
}

describeEachDatabase("credits on $name", (db) => {
  let h: Harness;
  let rpc: FakeSolanaRpc;
  const treasury = Keypair.generate().publicKey;

  beforeAll(async () => {
    rpc = await startFakeSolanaRpc();
    h = await startHarness(db, { config: { TREASURY_WALLET: treasury.toBase58(), SOLANA_RPC_URL: rpc.url, STABLE_MINT: USDC_MINT.toBase58() } });
  });
  afterAll(async () => {
    await h.close();
    await rpc.close();
  });

  const users: string[] = [];
  async function tenant() {
    const kp = Keypair.generate();
    const s = await h.signIn(walletOf(kp));
    users.push(s.user.id);
    return { kp, ...s };
  }
  // The ledger's running balance always equals the sum of its rows.
  afterEach(async () => {
    for (const id of users) {
      const b = await h.deps.repos.ledger.balance(id);
      expect(b.balanceMicro).toBe(await h.deps.repos.ledger.sumOfRows(id));
      expect(b.availableMicro).toBeGreaterThanOrEqual(0);
    }
    await checkWholeBooks(h.deps.repos);
  });

  async function initiate(t: Awaited<ReturnType<typeof tenant>>, packageId = "pkg_builder") {
    const r = await h.call("POST", "/credits/deposit/initiate", { token: t.token, body: { packageId, walletAddress: t.wallet.address } });
    expect(r.status).toBe(200);
    return r.json.deposit as { depositId: string; amountStable: number; creditsToReceive: number; expiresAt: string };
  }
  function pay(t: { kp: Keypair }, o: Partial<PaymentOptions> = {}) {
    const p = makeUsdcPayment({
      payer: t.kp,
      treasuryOwner: treasury,
      amountBaseUnits: 50_000_000n,
      kind: "transferChecked",
      blockTimeMs: Math.floor(h.clock.now() / 1000) * 1000,
      ...o,
    });
    rpc.addTransaction(p.tx, p.meta);
    return p.signature;
  }
  const confirm = (t: { token: string }, depositId: string, txSignature: string) =>
    h.call("POST", "/credits/deposit/confirm", { token: t.token, body: { depositId, txSignature } });

  it("sells packages with bonuses", async () => {
    const t = await tenant();
    const r = await h.call("GET", "/credits/packages", { token: t.token });
    expect(r.status).toBe(200);
    const builder = r.json.packages.find((p: { id: string }) => p.id === "pkg_builder");
    expect(builder).toEqual({ id: "pkg_builder", name: "Builder", credits: 5000, priceUsd: 50, priceStable: 50, bonusPercent: 5, creditsToReceive: 5250 });
    expect((await h.call("GET", "/credits/packages")).status).toBe(401);
  });

  it("initiates a deposit for the package's price, to the treasury, in the stable mint, valid 30 minutes", async () => {
    const t = await tenant();
    const d = await initiate(t);
    expect(d).toMatchObject({ amountStable: 50, creditsToReceive: 5250, treasuryWallet: treasury.toBase58(), stableMint: USDC_MINT.toBase58() });
    expect(Date.parse(d.expiresAt)).toBe(h.clock.now() + 30 * 60_000);
    const bad = await h.call("POST", "/credits/deposit/initiate", { token: t.token, body: { packageId: "pkg_nope", walletAddress: t.wallet.address } });
    expect(bad.json.error.code).toBe("PACKAGE_NOT_FOUND");
    const other = await h.call("POST", "/credits/deposit/initiate", {
      token: t.token,
      body: { packageId: "pkg_builder", walletAddress: Keypair.generate().publicKey.toBase58() },
    });
    expect(other.json.error.code).toBe("DEPOSIT_WALLET_MISMATCH");
    const garbage = await h.call("POST", "/credits/deposit/initiate", { token: t.token, body: { packageId: "pkg_builder", walletAddress: "xyz" } });
    expect(garbage.json.error.code).toBe("INVALID_WALLET_ADDRESS");
  });

  it("credits a good payment once, records it in the ledger, and answers a repeat with the same transaction", async () => {
    const t = await tenant();
    const d = await initiate(t);
    const sig = pay(t);
    const r = await confirm(t, d.depositId, sig);
    expect(r.status).toBe(200);
    expect(r.json.transaction).toMatchObject({ type: "deposit", amount: 5250, txSignature: sig });
    expect(r.json.newBalance).toEqual({ available: 5250, reserved: 0, totalUsed: 0 });
    const again = await confirm(t, d.depositId, sig);
    expect(again.status).toBe(200);
    expect(again.json.transaction).toEqual(r.json.transaction);
    expect(again.json.newBalance.available).toBe(5250);
    const list = await h.call("GET", "/credits/transactions", { token: t.token });
    expect(list.json.transactions).toEqual([r.json.transaction]);
    expect(list.json.pagination).toEqual({ page: 1, limit: 20, total: 1, totalPages: 1 });
    expect((await h.call("GET", "/credits/balance", { token: t.token })).json.balance).toEqual({ available: 5250, reserved: 0, totalUsed: 0 });
  });

  it("accepts legacy and version-0 transactions, transfer and transferChecked", async () => {
    for (const [kind, version] of [
      ["transfer", "legacy"],
      ["transfer", 0],
      ["transferChecked", 0],
    ] as const) {
      const t = await tenant();
      const d = await initiate(t);
      const r = await confirm(t, d.depositId, pay(t, { kind, version }));
      expect(r.status, `${kind} ${version}: ${r.text}`).toBe(200);
    }
  });

  it("refuses each bad payment with its own code and leaves the deposit pending", async () => {
    const cases: Array<[Partial<PaymentOptions>, DepositRefusalCode]> = [
      [{ mint: Keypair.generate().publicKey }, "MINT_MISMATCH"],
      [{ treasuryOwner: Keypair.generate().publicKey }, "RECIPIENT_MISMATCH"],
      [{ amountBaseUnits: 49_999_999n }, "AMOUNT_TOO_LOW"],
      [{ failed: true }, "TX_FAILED"],
      [{ payer: Keypair.generate() }, "PAYER_MISMATCH"],
    ];
    const t = await tenant();
    const d = await initiate(t);
    const state = async () => (await h.call("GET", `/credits/deposits/${d.depositId}`, { token: t.token })).json.deposit;
    for (const [o, code] of cases) {
      const signature = pay(t, o);
      const r = await confirm(t, d.depositId, signature);
      expect(r.json.error?.code, code).toBe(code);
      expect(r.status).toBe(422);
      // The deposit keeps the latest refusal, in the API's words.
      expect(await state()).toMatchObject({ status: "pending", refusal: { code, message: ERROR_CODES[code].description, txSignature: signature } });
    }
    expect((await h.call("GET", "/credits/balance", { token: t.token })).json.balance.available).toBe(0);
    // Still pending: a good payment now succeeds, and the deposit no longer names a refusal.
    expect((await confirm(t, d.depositId, pay(t))).status).toBe(200);
    expect(await state()).not.toHaveProperty("refusal");
  });

  it("refuses a payment that landed after the deposit expired, and a confirm after expiry plus the grace", async () => {
    const t = await tenant();
    const d = await initiate(t);
    const late = pay(t, { blockTimeMs: Math.floor((h.clock.now() + 31 * 60_000) / 1000) * 1000 });
    expect((await confirm(t, d.depositId, late)).json.error.code).toBe("PAYMENT_AFTER_EXPIRY");
    const refused = (await h.call("GET", `/credits/deposits/${d.depositId}`, { token: t.token })).json.deposit;
    expect(refused.refusal).toEqual({ code: "PAYMENT_AFTER_EXPIRY", message: "The payment landed after the deposit expired.", txSignature: late });
    const onTime = pay(t);
    // DEPOSIT_GRACE_S (10 minutes) after expiresAt.
    h.clock.advance(40 * 60_000 + 1);
    const fresh = await h.signIn(t.wallet);
    const r = await confirm(fresh, d.depositId, onTime);
    expect(r.status).toBe(410);
    expect(r.json.error.code).toBe("DEPOSIT_EXPIRED");
  });

  it("credits a payment made before expiresAt and confirmed after it, within the grace", async () => {
    const t = await tenant();
    const d = await initiate(t);
    const onTime = pay(t);
    h.clock.advance(30 * 60_000 + 5 * 60_000);
    const fresh = await h.signIn(t.wallet);
    const r = await confirm(fresh, d.depositId, onTime);
    expect(r.status).toBe(200);
    expect(r.json.newBalance.available).toBe(d.creditsToReceive);
  });

  it("never credits one signature twice, across deposits or users", async () => {
    const t = await tenant();
    const d1 = await initiate(t);
    const d2 = await initiate(t);
    const sig = pay(t);
    expect((await confirm(t, d1.depositId, sig)).status).toBe(200);
    const reuse = await confirm(t, d2.depositId, sig);
    expect(reuse.status).toBe(409);
    expect(reuse.json.error.code).toBe("SIGNATURE_ALREADY_USED");
    const other = await tenant();
    const d3 = await initiate(other);
    expect((await confirm(other, d3.depositId, sig)).json.error.code).toBe("SIGNATURE_ALREADY_USED");
    expect((await confirm(t, d1.depositId, pay(t))).json.error.code).toBe("DEPOSIT_ALREADY_CONFIRMED");
  });

  it("keeps deposits private: another user's deposit is not found", async () => {
    const a = await tenant();
    const b = await tenant();
    const d = await initiate(a);
    const r = await confirm(b, d.depositId, pay(a));
    expect(r.status).toBe(404);
    expect(r.json.error.code).toBe("DEPOSIT_NOT_FOUND");
  });

  it("answers an unknown signature with a retryable TX_NOT_FOUND, and a down RPC with CHAIN_UNAVAILABLE; the same confirm succeeds later", async () => {
    const t = await tenant();
    const d = await initiate(t);
    const p = makeUsdcPayment({ payer: t.kp, treasuryOwner: treasury, amountBaseUnits: 50_000_000n, blockTimeMs: Math.floor(h.clock.now() / 1000) * 1000 });
    const unknown = await confirm(t, d.depositId, p.signature);
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.code).toBe("TX_NOT_FOUND");
    expect(unknown.headers.get("retry-after")).toBe("5");
    rpc.addTransaction(p.tx, p.meta);
    await rpc.setDown(true, "refuse");
    const down = await confirm(t, d.depositId, p.signature);
    expect(down.status).toBe(503);
    expect(down.json.error.code).toBe("CHAIN_UNAVAILABLE");
    await rpc.setDown(false);
    const ok = await confirm(t, d.depositId, p.signature);
    expect(ok.status).toBe(200);
    expect(ok.json.newBalance.available).toBe(5250);
  });

  it("credits once when ten confirms of one deposit race", async () => {
    const t = await tenant();
    const d = await initiate(t);
    const sig = pay(t);
    const rs = await Promise.all(Array.from({ length: 10 }, () => confirm(t, d.depositId, sig)));
    expect(rs.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(new Set(rs.map((r) => r.json.transaction.id)).size).toBe(1);
    const list = await h.call("GET", "/credits/transactions?type=deposit", { token: t.token });
    expect(list.json.transactions).toHaveLength(1);
    expect((await h.call("GET", "/credits/balance", { token: t.token })).json.balance.available).toBe(5250);
  });

  it("credits once when one signature races across two deposits", async () => {
    const t = await tenant();
    const [d1, d2] = [await initiate(t), await initiate(t)];
    const sig = pay(t);
    const rs = await Promise.all([...Array(5)].flatMap(() => [confirm(t, d1.depositId, sig), confirm(t, d2.depositId, sig)]));
    const ok = rs.filter((r) => r.status === 200);
    expect(new Set(ok.map((r) => r.json.transaction.id)).size).toBe(1);
    expect(rs.filter((r) => r.status !== 200).every((r) => r.json.error.code === "SIGNATURE_ALREADY_USED")).toBe(true);
    expect((await h.call("GET", "/credits/balance", { token: t.token })).json.balance.available).toBe(5250);
  });

  it("pages the ledger newest first and filters by type", async () => {
    const t = await tenant();
    for (let i = 0; i < 3; i++) {
      const d = await initiate(t, "pkg_starter");
      h.clock.advance(1000);
      expect((await confirm(t, d.depositId, pay(t, { amountBaseUnits: 10_000_000n }))).status).toBe(200);
    }
    const p1 = await h.call("GET", "/credits/transactions?limit=2", { token: t.token });
    expect(p1.json.transactions).toHaveLength(2);
    expect(p1.json.pagination).toEqual({ page: 1, limit: 2, total: 3, totalPages: 2 });
    expect(Date.parse(p1.json.transactions[0].createdAt)).toBeGreaterThan(Date.parse(p1.json.transactions[1].createdAt));
    expect((await h.call("GET", "/credits/transactions?type=usage", { token: t.token })).json.transactions).toEqual([]);
    expect((await h.call("GET", "/credits/transactions?type=bogus", { token: t.token })).json.error.code).toBe("VALIDATION_ERROR");
  });

  it("validates the confirm body", async () => {
    const t = await tenant();
    const r = await h.call("POST", "/credits/deposit/confirm", { token: t.token, body: { depositId: "dpst_x", txSignature: "not-a-signature" } });
    expect(r.json.error.code).toBe("VALIDATION_ERROR");
    const unknown = await confirm(t, "dpst_nope", bs58.encode(new Uint8Array(64).fill(7)));
    expect(unknown.json.error.code).toBe("DEPOSIT_NOT_FOUND");
  });
});

describe("deposits where payments are not configured", () => {
  it("says what is wrong with the request first, and PAYMENTS_NOT_CONFIGURED only for a good one", async () => {
    const h = await startHarness(sqliteDatabase); // no TREASURY_WALLET
    try {
      const t = await h.signIn();
      const initiate = (body: Record<string, unknown>) => h.call("POST", "/credits/deposit/initiate", { token: t.token, body });
      expect((await initiate({ packageId: "pkg_builder" })).json.error.code).toBe("VALIDATION_ERROR");
      expect((await initiate({ packageId: "pkg_builder", walletAddress: "xyz" })).json.error.code).toBe("INVALID_WALLET_ADDRESS");
      expect((await initiate({ packageId: "pkg_builder", walletAddress: Keypair.generate().publicKey.toBase58() })).json.error.code).toBe(
        "DEPOSIT_WALLET_MISMATCH",
      );
      expect((await initiate({ packageId: "pkg_nope", walletAddress: t.wallet.address })).json.error.code).toBe("PACKAGE_NOT_FOUND");
      const good = await initiate({ packageId: "pkg_builder", walletAddress: t.wallet.address });
      expect(good.status).toBe(503);
      expect(good.json.error.code).toBe("PAYMENTS_NOT_CONFIGURED");
    } finally {
      await h.close();
    }
  });
});
