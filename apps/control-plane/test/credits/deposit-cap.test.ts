import { describeEachDatabase } from "@cm/testkit";
import { Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, expect, it } from "vitest";
import { testConfig } from "../../src/config";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../support/fake-solana-rpc";
import { type Harness, startHarness } from "../support/harness";
import { makeUsdcPayment, USDC_MINT } from "../support/solana-fixtures";

// Issue 36: one account opened 5,000 unpaid deposits in 24 s. Each open deposit is
// something the watcher may be asked about, so an account holds only a few at once.

const CAP = 3;

it("MAX_OPEN_DEPOSITS defaults to 20", () => {
  expect(testConfig({}).MAX_OPEN_DEPOSITS).toBe(20);
});

describeEachDatabase("open deposits per account on $name", (db) => {
  let h: Harness;
  let rpc: FakeSolanaRpc;
  const treasury = Keypair.generate().publicKey;

  beforeAll(async () => {
    rpc = await startFakeSolanaRpc();
    h = await startHarness(db, {
      config: { TREASURY_WALLET: treasury.toBase58(), SOLANA_RPC_URL: rpc.url, STABLE_MINT: USDC_MINT.toBase58(), MAX_OPEN_DEPOSITS: CAP },
    });
  });
  afterAll(async () => {
    await h.close();
    await rpc.close();
  });

  const initiate = (t: Awaited<ReturnType<Harness["signIn"]>>) =>
    h.call("POST", "/credits/deposit/initiate", { token: t.token, body: { packageId: "pkg_builder", walletAddress: t.wallet.address } });

  it("refuses the deposit past MAX_OPEN_DEPOSITS with 429 TOO_MANY_OPEN_DEPOSITS, saying what to do and when the oldest expires", async () => {
    const t = await h.signIn();
    for (let i = 0; i < CAP; i++) expect((await initiate(t)).status).toBe(200);
    h.clock.advance(60_000);
    const refused = await initiate(t);
    expect(refused.status).toBe(429);
    expect(refused.json.error).toMatchObject({ code: "TOO_MANY_OPEN_DEPOSITS", requestId: expect.any(String) });
    expect(refused.json.error.message).toMatch(/3 deposits pending.*pay one.*expire/);
    // The oldest expires 30 minutes after it opened, one minute ago, and is past its expiresAt a second later.
    expect(refused.headers.get("retry-after")).toBe(String(29 * 60 + 1));
    // Another account is not held to this one's deposits.
    expect((await initiate(await h.signIn())).status).toBe(200);
  });

  it("holds to the cap when the initiates race", async () => {
    const t = await h.signIn();
    const answers = await Promise.all(Array.from({ length: 12 }, () => initiate(t)));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(CAP);
    expect(answers.filter((a) => a.status === 429).map((a) => a.json.error.code)).toEqual(Array(12 - CAP).fill("TOO_MANY_OPEN_DEPOSITS"));
  });

  it("a paid deposit frees its place, and so does an expired one", async () => {
    const t = await h.signIn();
    const kp = Keypair.fromSecretKey(t.wallet.secretKey);
    const opened: string[] = [];
    for (let i = 0; i < CAP; i++) opened.push((await initiate(t)).json.deposit.depositId);
    expect((await initiate(t)).status).toBe(429);

    const p = makeUsdcPayment({
      payer: kp,
      treasuryOwner: treasury,
      amountBaseUnits: 50_000_000n,
      kind: "transferChecked",
      blockTimeMs: Math.floor(h.clock.now() / 1000) * 1000,
    });
    rpc.addTransaction(p.tx, p.meta);
    const confirmed = await h.call("POST", "/credits/deposit/confirm", { token: t.token, body: { depositId: opened[0], txSignature: p.signature } });
    expect(confirmed.status).toBe(200);
    expect((await initiate(t)).status).toBe(200);
    expect((await initiate(t)).status).toBe(429);

    h.clock.advance(30 * 60_000 + 1);
    const fresh = await h.signIn(t.wallet);
    for (let i = 0; i < CAP; i++) expect((await initiate(fresh)).status).toBe(200);
  });
});
