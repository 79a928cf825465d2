import { describeEachDatabase } from "@cm/testkit";
import { createTransfer, parseURL } from "@solana/pay";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Connection, Keypair, PublicKey, sendAndConfirmTransaction } from "@solana/web3.js";
import bs58 from "bs58";
import nacl from "tweetnacl";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { newReference } from "../../src/services/chain/transfer-request";
import { associatedTokenAccount, SWEEP_PER_TICK } from "../../src/services/deposit-watcher";
import { checkWholeBooks } from "../support/books";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../support/fake-solana-rpc";
import { type Harness, startHarness, type Wallet } from "../support/harness";
import { USDC_DECIMALS, USDC_MINT } from "../support/solana-fixtures";
import { payTransferRequest } from "../support/solana-pay";

// Deposits paid the way a wallet app pays a Solana Pay QR code: the real @solana/pay
// client reads the URL the API answered, builds the transfer and sends it to the RPC.

function walletOf(kp: Keypair): Wallet {
  return {
    address: kp.publicKey.toBase58(),
    secretKey: kp.secretKey,
    sign: (m) => Buffer.from(nacl.sign.detached(new TextEncoder().encode(m), kp.secretKey)).toString("base64"),
  };
}

type InitiatedDeposit = {
  depositId: string;
  amountStable: number;
  creditsToReceive: number;
  treasuryWallet: string;
  expiresAt: string;
  reference: string;
  transferRequestUrl: string;
};

describeEachDatabase("deposits by Solana Pay reference on $name", (db) => {
  let h: Harness;
  let rpc: FakeSolanaRpc;
  let connection: Connection;
  const treasury = Keypair.generate().publicKey;

  beforeAll(async () => {
    // The chain's clock is the control plane's, so block times fall inside the deposit's life.
    rpc = await startFakeSolanaRpc({ now: () => h.clock.now() });
    connection = new Connection(rpc.url, "confirmed");
    h = await startHarness(db, { config: { TREASURY_WALLET: treasury.toBase58(), SOLANA_RPC_URL: rpc.url, STABLE_MINT: USDC_MINT.toBase58() } });
    // createTransfer requires the recipient's token account to exist.
    rpc.fundTokenAccount({ owner: treasury, mint: USDC_MINT, decimals: USDC_DECIMALS, amountBaseUnits: 0n });
  });
  afterAll(async () => {
    await h.close();
    await rpc.close();
  });

  const users: string[] = [];
  afterEach(async () => {
    for (const id of users) expect((await h.deps.repos.ledger.balance(id)).balanceMicro).toBe(await h.deps.repos.ledger.sumOfRows(id));
    await checkWholeBooks(h.deps.repos);
  });

  async function tenant() {
    const kp = Keypair.generate();
    rpc.fundTokenAccount({ owner: kp.publicKey, mint: USDC_MINT, decimals: USDC_DECIMALS, amountBaseUnits: 1_000_000_000n });
    const s = await h.signIn(walletOf(kp));
    users.push(s.user.id);
    return { kp, ...s };
  }
  async function initiate(t: Awaited<ReturnType<typeof tenant>>, packageId = "pkg_builder") {
    const r = await h.call("POST", "/credits/deposit/initiate", { token: t.token, body: { packageId, walletAddress: t.wallet.address } });
    expect(r.status).toBe(200);
    return r.json.deposit as InitiatedDeposit;
  }

  it("answers a fresh reference and a transfer request @solana/pay reads as the deposit's payment", async () => {
    const t = await tenant();
    const a = await initiate(t);
    const b = await initiate(t);
    expect(a.reference).not.toBe(b.reference);
    expect(bs58.decode(a.reference)).toHaveLength(32);

    const fields = parseURL(a.transferRequestUrl);
    expect(fields).toMatchObject({ recipient: treasury, splToken: USDC_MINT, reference: [new PublicKey(a.reference)] });
    if (!("amount" in fields) || !fields.amount) throw new Error("the URL names no amount");
    expect(fields.amount.toNumber()).toBe(a.amountStable);
    expect(fields.label).toBe("Compute marketplace");
    expect(fields.message).toContain(a.depositId);
  });

  it("a payment built from the URL by createTransfer is credited by the explicit confirm", async () => {
    const t = await tenant();
    const d = await initiate(t);
    const signature = await payTransferRequest(connection, d.transferRequestUrl, t.kp);

    const r = await h.call("POST", "/credits/deposit/confirm", { token: t.token, body: { depositId: d.depositId, txSignature: signature } });
    expect(r.status).toBe(200);
    expect(r.json.transaction).toMatchObject({ type: "deposit", amount: d.creditsToReceive, txSignature: signature });
    expect(r.json.newBalance.available).toBe(d.creditsToReceive);
  });

  it("GET /credits/deposits/{id}: pending with its transfer request, confirmed with its transaction, expired past expiresAt", async () => {
    const t = await tenant();
    const d = await initiate(t);
    const state = async (id = d.depositId, token = t.token) => h.call("GET", `/credits/deposits/${id}`, { token });

    const pending = await state();
    expect(pending.status).toBe(200);
    expect(pending.json.deposit).toEqual({
      depositId: d.depositId,
      status: "pending",
      amountStable: d.amountStable,
      creditsToReceive: d.creditsToReceive,
      treasuryWallet: d.treasuryWallet,
      stableMint: USDC_MINT.toBase58(),
      expiresAt: d.expiresAt,
      reference: d.reference,
      transferRequestUrl: d.transferRequestUrl,
    });

    const signature = await payTransferRequest(connection, d.transferRequestUrl, t.kp);
    expect((await h.call("POST", "/credits/deposit/confirm", { token: t.token, body: { depositId: d.depositId, txSignature: signature } })).status).toBe(200);
    const confirmed = (await state()).json.deposit;
    expect(confirmed).toMatchObject({ status: "confirmed", txSignature: signature, confirmedAt: new Date(h.clock.now()).toISOString() });
    expect(confirmed).not.toHaveProperty("transferRequestUrl");

    const unpaid = await initiate(t);
    h.clock.advance(30 * 60_000 + 1);
    const fresh = await h.signIn(t.wallet);
    const expired = (await state(unpaid.depositId, fresh.token)).json.deposit;
    expect(expired).toMatchObject({ status: "expired", reference: unpaid.reference });
    expect(expired).not.toHaveProperty("transferRequestUrl");
    // A confirmed deposit stays confirmed whatever the time.
    expect((await state(d.depositId, fresh.token)).json.deposit.status).toBe("confirmed");
  });

  const balance = async (token: string) => (await h.call("GET", "/credits/balance", { token })).json.balance.available as number;
  const state = async (id: string, token: string) => (await h.call("GET", `/credits/deposits/${id}`, { token })).json.deposit;

  it("the watcher credits a payment built by createTransfer with no confirm call, once", async () => {
    const t = await tenant();
    const d = await initiate(t);
    const signature = await payTransferRequest(connection, d.transferRequestUrl, t.kp);
    expect(await balance(t.token)).toBe(0);

    await h.deps.depositWatcher.tick();
    expect(await balance(t.token)).toBe(d.creditsToReceive);
    expect(await state(d.depositId, t.token)).toMatchObject({ status: "confirmed", txSignature: signature });
    // Later ticks and a late confirm change nothing.
    await h.deps.depositWatcher.tick();
    const r = await h.call("POST", "/credits/deposit/confirm", { token: t.token, body: { depositId: d.depositId, txSignature: signature } });
    expect(r.status).toBe(200);
    expect(await balance(t.token)).toBe(d.creditsToReceive);
    const deposits = (await h.call("GET", "/credits/transactions?type=deposit", { token: t.token })).json.transactions;
    expect(deposits).toHaveLength(1);
  });

  it("confirm racing the watcher credits each deposit once", async () => {
    const t = await tenant();
    const paid: Array<{ d: InitiatedDeposit; signature: string }> = [];
    for (let i = 0; i < 4; i++) {
      const d = await initiate(t, "pkg_starter");
      paid.push({ d, signature: await payTransferRequest(connection, d.transferRequestUrl, t.kp) });
    }
    const answers = await Promise.all([
      h.deps.depositWatcher.tick(),
      ...paid.map(({ d, signature }) =>
        h.call("POST", "/credits/deposit/confirm", { token: t.token, body: { depositId: d.depositId, txSignature: signature } }),
      ),
      h.deps.depositWatcher.tick(),
    ]);
    for (const r of answers.slice(1, -1) as Array<{ status: number }>) expect(r.status).toBe(200);
    await h.deps.depositWatcher.tick();
    const total = paid.reduce((sum, { d }) => sum + d.creditsToReceive, 0);
    expect(await balance(t.token)).toBe(total);
    const rows = (await h.call("GET", "/credits/transactions?type=deposit", { token: t.token })).json.transactions as Array<{ txSignature: string }>;
    expect(rows.map((row) => row.txSignature).sort()).toEqual(paid.map((p) => p.signature).sort());
  });

  it("credits a payment made before expiresAt and seen within the grace; seen after expiry plus the grace, the deposit stays expired", async () => {
    const t = await tenant();
    const tooLate = await initiate(t);
    await payTransferRequest(connection, tooLate.transferRequestUrl, t.kp);
    // First seen 11 minutes after expiresAt: past DEPOSIT_GRACE_S (10 minutes).
    h.clock.advance(41 * 60_000);
    let fresh = await h.signIn(t.wallet);
    await h.deps.depositWatcher.tick();
    expect(await state(tooLate.depositId, fresh.token)).toMatchObject({ status: "expired" });
    expect(await balance(fresh.token)).toBe(0);

    const onTime = await initiate({ ...fresh, kp: t.kp });
    await payTransferRequest(connection, onTime.transferRequestUrl, t.kp);
    // First seen 5 minutes after expiresAt.
    h.clock.advance(35 * 60_000);
    fresh = await h.signIn(t.wallet);
    await h.deps.depositWatcher.tick();
    expect(await state(onTime.depositId, fresh.token)).toMatchObject({ status: "confirmed" });
    expect(await balance(fresh.token)).toBe(onTime.creditsToReceive);
  });

  it("a payment landing after expiresAt is refused: the deposit, expired, names it as PAYMENT_AFTER_EXPIRY and nothing is credited", async () => {
    const t = await tenant();
    const d = await initiate(t);
    // Lands 5 minutes after expiresAt: within DEPOSIT_GRACE_S, so the watcher still looks, and sees its block time.
    h.clock.advance(35 * 60_000);
    const fresh = await h.signIn(t.wallet);
    const late = await payTransferRequest(connection, d.transferRequestUrl, t.kp);
    await h.deps.depositWatcher.tick();
    const refusal = { code: "PAYMENT_AFTER_EXPIRY", message: "The payment landed after the deposit expired.", txSignature: late };
    expect(await state(d.depositId, fresh.token)).toMatchObject({ status: "expired", refusal });
    expect(await balance(fresh.token)).toBe(0);

    // Past expiresAt plus the grace the watcher stops looking; the deposit still says why.
    h.clock.advance(6 * 60_000);
    const later = await h.signIn(t.wallet);
    await h.deps.depositWatcher.tick();
    expect(await state(d.depositId, later.token)).toMatchObject({ status: "expired", refusal });
    expect(await balance(later.token)).toBe(0);
    expect((await h.call("GET", "/credits/transactions?type=deposit", { token: later.token })).json.transactions).toHaveLength(0);
  });

  it("a refused payment is kept on the open deposit until a valid one credits it; a confirmed deposit names no refusal", async () => {
    const t = await tenant();
    const d = await initiate(t);
    // The transfer request's reference, one base unit short, as a wallet that let the user edit the amount would send it.
    const fields = parseURL(d.transferRequestUrl);
    if (!("recipient" in fields) || !fields.amount) throw new Error("not a transfer request with an amount");
    const short = await createTransfer(connection, t.kp.publicKey, { ...fields, amount: fields.amount.minus("0.000001") }, { commitment: "confirmed" });
    const shortSig = await sendAndConfirmTransaction(connection, short, [t.kp], { commitment: "confirmed" });
    await h.deps.depositWatcher.tick();
    expect(await state(d.depositId, t.token)).toMatchObject({ status: "pending", refusal: { code: "AMOUNT_TOO_LOW", txSignature: shortSig } });
    expect(await balance(t.token)).toBe(0);

    const paid = await payTransferRequest(connection, d.transferRequestUrl, t.kp);
    await h.deps.depositWatcher.tick();
    const confirmed = await state(d.depositId, t.token);
    expect(confirmed).toMatchObject({ status: "confirmed", txSignature: paid });
    expect(confirmed).not.toHaveProperty("refusal");
    expect(await balance(t.token)).toBe(d.creditsToReceive);
    const rows = await h.deps.repos.deposits.get(d.depositId, t.user.id);
    expect(rows).toMatchObject({ refusalCode: null, refusalSignature: null });
  });

  it("a tick the RPC fails credits nothing and throws nothing; the next one credits", async () => {
    const t = await tenant();
    const d = await initiate(t);
    await payTransferRequest(connection, d.transferRequestUrl, t.kp);
    rpc.fail("getSignaturesForAddress", { kind: "error", error: { code: -32005, message: "Node is behind by 42 slots" } });
    await h.deps.depositWatcher.tick();
    expect(await balance(t.token)).toBe(0);
    rpc.heal("getSignaturesForAddress");
    await h.deps.depositWatcher.tick();
    expect(await balance(t.token)).toBe(d.creditsToReceive);
  });

  it("watches the treasury's associated token account, the one createTransfer pays", () => {
    expect(associatedTokenAccount(treasury.toBase58(), USDC_MINT.toBase58())).toBe(getAssociatedTokenAddressSync(USDC_MINT, treasury).toBase58());
  });

  it("a tick's RPC calls do not grow with the open deposits: one listing of the treasury and a few searches", async () => {
    const t = await tenant();
    for (let i = 0; i < h.deps.config.MAX_OPEN_DEPOSITS; i++) await initiate(t, "pkg_starter");
    await h.deps.depositWatcher.tick();
    const before = rpc.calls.length;
    await h.deps.depositWatcher.tick();
    // No new payment: the listing, then SWEEP_PER_TICK deposits searched by reference (one listing each).
    expect(rpc.calls.length - before).toBeLessThanOrEqual(1 + SWEEP_PER_TICK);
  });

  it("a payment costs a lookup of the deposit whose reference it names, not a search of each open deposit of the wallet that paid", async () => {
    const t = await tenant();
    const deposits: InitiatedDeposit[] = [];
    for (let i = 0; i < h.deps.config.MAX_OPEN_DEPOSITS; i++) deposits.push(await initiate(t, "pkg_starter"));
    await h.deps.depositWatcher.tick();
    const paid = deposits[17]!;
    const signature = await payTransferRequest(connection, paid.transferRequestUrl, t.kp);
    const before = rpc.calls.length;
    await h.deps.depositWatcher.tick();
    expect(await state(paid.depositId, t.token)).toMatchObject({ status: "confirmed", txSignature: signature });
    const listings = rpc.calls.slice(before).filter((c) => c.method === "getSignaturesForAddress");
    // The treasury's, whose new transaction names the paid deposit's reference, and SWEEP_PER_TICK in turn: not one per deposit of this wallet.
    expect(listings.length).toBeLessThanOrEqual(1 + SWEEP_PER_TICK);
  });

  it("the sweep searches every open deposit in turn, those expiring in the same millisecond included", async () => {
    const { handle } = h.deps.repos;
    const expiresAt = h.clock.now() + 20 * 60_000;
    const rows = Array.from({ length: 3 * SWEEP_PER_TICK + 2 }, (_, i) => ({
      id: `dpst_tie${i}`,
      userId: `usr_tie${i}`,
      packageId: "pkg_starter",
      walletAddress: Keypair.generate().publicKey.toBase58(),
      amountStableBase: 10_000_000,
      stableDecimals: USDC_DECIMALS,
      creditsMicro: 10_000_000_000,
      treasuryWallet: treasury.toBase58(),
      stableMint: USDC_MINT.toBase58(),
      expiresAt,
      createdAt: expiresAt - 30 * 60_000,
      reference: newReference(),
      status: "pending" as const,
    }));
    await handle.run((db) => db.insert(handle.t.deposits).values(rows));
    const open = await h.deps.repos.deposits.openFrom(h.clock.now() - h.deps.config.DEPOSIT_GRACE_S * 1000, 10_000);
    const before = rpc.calls.length;
    for (let i = 0; i < Math.ceil(open.length / SWEEP_PER_TICK) + 1; i++) await h.deps.depositWatcher.tick();
    const searched = new Set(rpc.calls.slice(before).map((c) => c.params[0]));
    expect(rows.filter((r) => !searched.has(r.reference))).toEqual([]);
  });

  // Issue 36: with 5,000 older deposits open the watcher read only the 5,000 oldest, so
  // a newer one paid by its reference alone stayed pending; and it read them all at every tick.
  it("a deposit opened after 5,000 others still open is credited by its reference alone within two ticks, and a tick's calls stay few", async () => {
    const nowMs = h.clock.now();
    const { handle } = h.deps.repos;
    const rows = Array.from({ length: 5_000 }, (_, i) => ({
      id: `dpst_flood${i}`,
      // As many accounts' deposits would be: one account holds only MAX_OPEN_DEPOSITS.
      userId: `usr_flood${Math.floor(i / h.deps.config.MAX_OPEN_DEPOSITS)}`,
      packageId: "pkg_starter",
      walletAddress: Keypair.generate().publicKey.toBase58(),
      amountStableBase: 10_000_000,
      stableDecimals: USDC_DECIMALS,
      creditsMicro: 10_000_000_000,
      treasuryWallet: treasury.toBase58(),
      stableMint: USDC_MINT.toBase58(),
      expiresAt: nowMs + 30 * 60_000,
      createdAt: nowMs - 60_000 + Math.floor(i / 100),
      reference: newReference(),
      status: "pending" as const,
    }));
    // Inserted in batches rather than one create (a transaction each) apiece: 0.1 s, not 6 s on SQLite and 20 s on PostgreSQL.
    for (let i = 0; i < rows.length; i += 250) await handle.run((db) => db.insert(handle.t.deposits).values(rows.slice(i, i + 250)));
    await h.deps.depositWatcher.tick();
    const before = rpc.calls.length;
    await h.deps.depositWatcher.tick();
    // Nothing paid: the treasury's listing and SWEEP_PER_TICK searches, whatever the number open.
    expect(rpc.calls.length - before).toBeLessThanOrEqual(1 + SWEEP_PER_TICK);

    const t = await tenant();
    const d = await initiate(t);
    const signature = await payTransferRequest(connection, d.transferRequestUrl, t.kp);
    for (let i = 0; i < 2 && (await state(d.depositId, t.token)).status === "pending"; i++) await h.deps.depositWatcher.tick();
    expect(await state(d.depositId, t.token)).toMatchObject({ status: "confirmed", txSignature: signature });
    expect(await balance(t.token)).toBe(d.creditsToReceive);
  });

  it("GET /credits/deposits/{id} answers 404 in the error shape for another's deposit and an unknown id, 401 without a token", async () => {
    const owner = await tenant();
    const other = await tenant();
    const d = await initiate(owner);
    for (const [id, token] of [
      [d.depositId, other.token],
      ["dpst_nope", owner.token],
    ] as const) {
      const r = await h.call("GET", `/credits/deposits/${id}`, { token });
      expect(r.status).toBe(404);
      expect(r.json.error).toMatchObject({ code: "DEPOSIT_NOT_FOUND", requestId: expect.any(String) });
    }
    expect((await h.call("GET", `/credits/deposits/${d.depositId}`)).status).toBe(401);
  });
});
