import { describeEachDatabase } from "@cm/testkit";
import { parseURL } from "@solana/pay";
import { Connection, Keypair, PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import nacl from "tweetnacl";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
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
