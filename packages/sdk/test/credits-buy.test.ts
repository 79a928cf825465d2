import { sqliteDatabase } from "@cm/testkit";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Connection, Keypair, VersionedTransaction } from "@solana/web3.js";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../../../apps/control-plane/test/support/fake-solana-rpc";
import { type Harness, startHarness, TestClock } from "../../../apps/control-plane/test/support/harness";
import { USDC_DECIMALS, USDC_MINT } from "../../../apps/control-plane/test/support/solana-fixtures";
import { payTransferRequest } from "../../../apps/control-plane/test/support/solana-pay";
import { ChainError, createClient, DepositWaitError, keypairSigner } from "../src";

// credits.buy through the tests' Solana RPC, which verifies, executes and lands the
// payment as a node would, and the control plane reads it back from there.

let h: Harness;
let rpc: FakeSolanaRpc;
const treasury = Keypair.generate().publicKey;
const clock = new TestClock(Date.now());
beforeAll(async () => {
  // The chain's clock is the control plane's, so a payment's block time is on the deposit's clock.
  rpc = await startFakeSolanaRpc({ now: () => clock.now() });
  h = await startHarness(sqliteDatabase, {
    overrides: { clock },
    config: { TREASURY_WALLET: treasury.toBase58(), SOLANA_RPC_URL: rpc.url, STABLE_MINT: USDC_MINT.toBase58() },
  });
});
afterAll(async () => {
  await h?.close();
  await rpc?.close();
});

async function signedIn(usdc: bigint) {
  const payer = Keypair.generate();
  rpc.fundTokenAccount({ owner: payer.publicKey, mint: USDC_MINT, decimals: USDC_DECIMALS, amountBaseUnits: usdc * 10n ** BigInt(USDC_DECIMALS) });
  const client = createClient({ baseUrl: h.url });
  await client.auth.signIn(await keypairSigner(payer.secretKey));
  const [pkg] = (await client.credits.packages()).packages;
  return { payer, client, pkg: pkg! };
}

describe("credits.buy", () => {
  it("pays with a keypair: sent, confirmed on chain, confirmed by the API, the credits and the USDC where they belong", async () => {
    const { payer, client, pkg } = await signedIn(1_000n);
    const steps: string[] = [];
    const answer = await client.credits.buy(pkg.id, payer, { rpcUrl: rpc.url, onStep: (step) => steps.push(step) });
    expect(steps).toEqual(["initiated", "sent", "confirmed-on-chain"]);
    expect(answer.newBalance.available).toBe(pkg.creditsToReceive);
    expect(answer.transaction.txSignature).toBe(rpc.sent.at(-1));
    const paid = BigInt(Math.round(pkg.priceStable * 10 ** USDC_DECIMALS));
    expect(rpc.tokenBalance(getAssociatedTokenAddressSync(USDC_MINT, payer.publicKey))).toBe(1_000n * 10n ** 6n - paid);
  });

  it("reads a deposit it started: pending, with the reference and transfer request initiate answered", async () => {
    const { payer, client, pkg } = await signedIn(1n);
    const { deposit } = await client.credits.initiateDeposit(pkg.id, payer.publicKey.toBase58());
    expect((await client.credits.deposit(deposit.depositId)).deposit).toMatchObject({
      depositId: deposit.depositId,
      status: "pending",
      reference: deposit.reference,
      transferRequestUrl: deposit.transferRequestUrl,
    });
  });

  it("pays with a wallet that signs transactions (a browser wallet's shape)", async () => {
    const { payer, client, pkg } = await signedIn(1_000n);
    const wallet = {
      publicKey: payer.publicKey,
      signTransaction: async <T>(tx: T) => {
        (tx as VersionedTransaction).sign([payer]);
        return tx;
      },
    };
    expect((await client.credits.buy(pkg.id, wallet, { rpcUrl: rpc.url })).newBalance.available).toBe(pkg.creditsToReceive);
  });

  it("pays with a Wallet Standard wallet that signs the transaction's bytes and answers the signed bytes", async () => {
    const { payer, client, pkg } = await signedIn(1_000n);
    const wallet = {
      publicKey: payer.publicKey,
      signTransaction: async <T>(tx: T) => {
        const copy = VersionedTransaction.deserialize((tx as VersionedTransaction).serialize());
        copy.sign([payer]);
        return copy.serialize();
      },
    };
    expect((await client.credits.buy(pkg.id, wallet, { rpcUrl: rpc.url })).newBalance.available).toBe(pkg.creditsToReceive);
  });

  it("pays with a wallet that signs and sends the transaction itself (solana:signAndSendTransaction), reporting the deposit at each step", async () => {
    const { payer, client, pkg } = await signedIn(1_000n);
    const connection = new Connection(rpc.url, "confirmed");
    const sentByWallet: string[] = [];
    const wallet = {
      publicKey: payer.publicKey.toBase58(),
      signAndSendTransaction: async (bytes: Uint8Array) => {
        const tx = VersionedTransaction.deserialize(bytes);
        tx.sign([payer]);
        const signature = await connection.sendRawTransaction(tx.serialize());
        sentByWallet.push(signature);
        return bs58.decode(signature);
      },
    };
    const deposits = new Set<string>();
    const answer = await client.credits.buy(pkg.id, wallet, { rpcUrl: rpc.url, onStep: (_step, _detail, deposit) => deposits.add(deposit.depositId) });
    expect(answer.newBalance.available).toBe(pkg.creditsToReceive);
    expect(answer.transaction.txSignature).toBe(sentByWallet[0]);
    expect(deposits.size).toBe(1);
  });

  it("throws ChainError TX_REJECTED when the chain refuses the payment, and credits nothing", async () => {
    const { payer, client, pkg } = await signedIn(0n);
    const err = await client.credits.buy(pkg.id, payer, { rpcUrl: rpc.url }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChainError);
    expect(err).toMatchObject({ code: "TX_REJECTED", message: expect.stringContaining("insufficient funds") });
    expect((await client.credits.balance()).balance.available).toBe(0);
  });
});

describe("credits.waitForDeposit", () => {
  it("answers once the control plane credits a payment made by the transfer request, with no confirm call", async () => {
    const { payer, client, pkg } = await signedIn(1_000n);
    rpc.fundTokenAccount({ owner: treasury, mint: USDC_MINT, decimals: USDC_DECIMALS, amountBaseUnits: 0n });
    const { deposit } = await client.credits.initiateDeposit(pkg.id, payer.publicKey.toBase58());
    const seen: string[] = [];
    const waiting = client.credits.waitForDeposit(deposit.depositId, { intervalMs: 20, onChange: (d) => seen.push(d.status) });
    const signature = await payTransferRequest(new Connection(rpc.url, "confirmed"), deposit.transferRequestUrl, payer);
    await h.deps.depositWatcher.tick();
    expect(await waiting).toMatchObject({ depositId: deposit.depositId, status: "confirmed", txSignature: signature });
    expect(seen).toEqual(["pending", "confirmed"]);
    expect((await client.credits.balance()).balance.available).toBe(pkg.creditsToReceive);
  });

  it("throws DepositWaitError DEPOSIT_EXPIRED for a deposit that expired unpaid", async () => {
    const { payer, client, pkg } = await signedIn(1n);
    const { deposit } = await client.credits.initiateDeposit(pkg.id, payer.publicKey.toBase58());
    clock.advance(30 * 60_000 + 1);
    // A fresh session: the first one's tokens expired with the clock.
    const later = createClient({ baseUrl: h.url });
    await later.auth.signIn(await keypairSigner(payer.secretKey));
    const err = await later.credits.waitForDeposit(deposit.depositId, { intervalMs: 20 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DepositWaitError);
    expect(err).toMatchObject({ code: "DEPOSIT_EXPIRED", deposit: { status: "expired" } });
  });

  it("names the payment the control plane refused when it gives up on the expired deposit", async () => {
    const { payer, client, pkg } = await signedIn(1_000n);
    rpc.fundTokenAccount({ owner: treasury, mint: USDC_MINT, decimals: USDC_DECIMALS, amountBaseUnits: 0n });
    const { deposit } = await client.credits.initiateDeposit(pkg.id, payer.publicKey.toBase58());
    // Paid 5 minutes after expiresAt: the watcher still looks (DEPOSIT_GRACE_S) and refuses it.
    clock.advance(35 * 60_000);
    const later = createClient({ baseUrl: h.url });
    await later.auth.signIn(await keypairSigner(payer.secretKey));
    const signature = await payTransferRequest(new Connection(rpc.url, "confirmed"), deposit.transferRequestUrl, payer);
    await h.deps.depositWatcher.tick();
    const err = await later.credits.waitForDeposit(deposit.depositId, { intervalMs: 20 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DepositWaitError);
    expect(err).toMatchObject({
      code: "DEPOSIT_EXPIRED",
      message: expect.stringContaining(`a payment (sig ${signature}) was refused: PAYMENT_AFTER_EXPIRY`),
      deposit: { status: "expired", refusal: { code: "PAYMENT_AFTER_EXPIRY", txSignature: signature } },
    });
    expect((await later.credits.balance()).balance.available).toBe(0);
  });
});
