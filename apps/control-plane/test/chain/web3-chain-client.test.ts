import { Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ChainLookup, TransferFacts } from "../../src/services/chain/chain-client";
import { createWeb3ChainClient } from "../../src/services/chain/web3-chain-client";
import type { FakeSolanaRpc } from "../support/fake-solana-rpc";
import { startFakeSolanaRpc } from "../support/fake-solana-rpc";
import { DEFAULT_BLOCK_TIME_MS, makeUsdcPayment, USDC_MINT } from "../support/solana-fixtures";

let rpc: FakeSolanaRpc;
beforeAll(async () => {
  rpc = await startFakeSolanaRpc();
});
afterAll(async () => {
  await rpc.close();
});
beforeEach(async () => {
  await rpc.setDown(false);
  rpc.setDelayMs(0);
  rpc.setRpcError(null);
});

const payer = Keypair.generate();
const treasury = Keypair.generate().publicKey;
const client = (commitment: "confirmed" | "finalized" = "confirmed", requestTimeoutMs = 2_000) =>
  createWeb3ChainClient({ rpcUrl: rpc.url, commitment, requestTimeoutMs });

function expectFound(lookup: ChainLookup): TransferFacts {
  if (lookup.kind !== "found") throw new Error(`expected found, got ${JSON.stringify(lookup)}`);
  return lookup.tx;
}

describe("web3 chain client against a Solana-shaped RPC", () => {
  const cases = (["legacy", 0] as const).flatMap((version) =>
    (["transfer", "transferChecked"] as const).flatMap((kind) =>
      (["direct", "cpi"] as const).map((route) => ({ version, kind, route, label: version === 0 ? "v0" : "legacy" })),
    ),
  );

  it.each(cases)("reads a $kind ($route) in a $label transaction", async ({ version, kind, route }) => {
    const payment = makeUsdcPayment({ payer, treasuryOwner: treasury, amountBaseUnits: 12_500_000n, kind, version, route });
    rpc.addTransaction(payment.tx, payment.meta);

    const facts = expectFound(await client().getTransfer(payment.signature));

    expect(facts).toMatchObject({ signature: payment.signature, slot: payment.meta.slot, blockTimeMs: DEFAULT_BLOCK_TIME_MS, failed: false });
    expect(facts.transfers).toEqual([
      {
        mint: USDC_MINT.toBase58(),
        source: payment.sourceTokenAccount.toBase58(),
        destination: payment.destinationTokenAccount.toBase58(),
        destinationOwner: treasury.toBase58(),
        authority: payer.publicKey.toBase58(),
        amountBaseUnits: 12_500_000n,
        decimals: 6,
      },
    ]);
    const byOwner = Object.fromEntries(facts.tokenBalanceDeltas.map((d) => [d.owner, d.deltaBaseUnits]));
    expect(byOwner).toEqual({ [treasury.toBase58()]: 12_500_000n, [payer.publicKey.toBase58()]: -12_500_000n });
  });

  it("asks for jsonParsed at the configured commitment and accepts v0 transactions", async () => {
    const payment = makeUsdcPayment({ payer, treasuryOwner: treasury, amountBaseUnits: 1n, version: 0 });
    rpc.addTransaction(payment.tx, payment.meta);
    await client("finalized").getTransfer(payment.signature);
    expect(rpc.calls.at(-1)).toEqual({
      method: "getTransaction",
      params: [payment.signature, { commitment: "finalized", encoding: "jsonParsed", maxSupportedTransactionVersion: 0 }],
    });
  });

  it("answers not_found for an unknown signature", async () => {
    const unknown = makeUsdcPayment({ payer, treasuryOwner: treasury, amountBaseUnits: 1n });
    expect(await client().getTransfer(unknown.signature)).toEqual({ kind: "not_found" });
  });

  it("answers not_found for a malformed signature without asking the node", async () => {
    const before = rpc.calls.length;
    expect(await client().getTransfer("not-a-signature")).toEqual({ kind: "not_found" });
    expect(await client().getTransfer("")).toEqual({ kind: "not_found" });
    expect(rpc.calls.length).toBe(before);
  });

  it("does not see a confirmed-only transaction at finalized, until it finalizes", async () => {
    const payment = makeUsdcPayment({ payer, treasuryOwner: treasury, amountBaseUnits: 5n, commitment: "confirmed" });
    rpc.addTransaction(payment.tx, payment.meta);
    expect(await client("finalized").getTransfer(payment.signature)).toEqual({ kind: "not_found" });
    expectFound(await client("confirmed").getTransfer(payment.signature));
    rpc.setCommitment(payment.signature, "finalized");
    expectFound(await client("finalized").getTransfer(payment.signature));
  });

  it("answers unavailable while the node refuses connections, then found once it is back", async () => {
    const payment = makeUsdcPayment({ payer, treasuryOwner: treasury, amountBaseUnits: 7n });
    rpc.addTransaction(payment.tx, payment.meta);
    const chain = client();
    expectFound(await chain.getTransfer(payment.signature)); // warms a keep-alive socket too

    await rpc.setDown(true);
    const down = await chain.getTransfer(payment.signature);
    expect(down).toMatchObject({ kind: "unavailable", reason: expect.stringContaining("RPC request failed") });

    await rpc.setDown(false);
    expectFound(await chain.getTransfer(payment.signature));
  });

  it("answers unavailable when the node answers HTTP 503", async () => {
    const payment = makeUsdcPayment({ payer, treasuryOwner: treasury, amountBaseUnits: 7n });
    rpc.addTransaction(payment.tx, payment.meta);
    await rpc.setDown(true, "http503");
    expect(await client().getTransfer(payment.signature)).toMatchObject({ kind: "unavailable", reason: expect.stringContaining("503") });
  });

  it("answers unavailable when the node answers a JSON-RPC error", async () => {
    const payment = makeUsdcPayment({ payer, treasuryOwner: treasury, amountBaseUnits: 7n });
    rpc.addTransaction(payment.tx, payment.meta);
    rpc.setRpcError({ code: -32005, message: "Node is behind by 1337 slots" });
    expect(await client().getTransfer(payment.signature)).toEqual({
      kind: "unavailable",
      reason: "RPC answered error -32005: failed to get transaction: Node is behind by 1337 slots",
    });
  });

  it("answers unavailable when the node is slower than the request timeout", async () => {
    const payment = makeUsdcPayment({ payer, treasuryOwner: treasury, amountBaseUnits: 7n });
    rpc.addTransaction(payment.tx, payment.meta);
    rpc.setDelayMs(3_000);
    const startedMs = Date.now();
    const lookup = await client("confirmed", 300).getTransfer(payment.signature);
    expect(lookup).toEqual({ kind: "unavailable", reason: "RPC did not answer within 300 ms" });
    expect(Date.now() - startedMs).toBeLessThan(2_000);
  });
});

describe("signaturesFor", () => {
  it("lists the transactions naming an address oldest first, the newest `limit` of them, at the configured commitment", async () => {
    const wallet = Keypair.generate();
    const slots = [330_001_000, 330_001_002, 330_001_001];
    const payments = slots.map((slot, i) => {
      const payment = makeUsdcPayment({ payer: wallet, treasuryOwner: treasury, amountBaseUnits: 1n, slot, failed: i === 2 });
      rpc.addTransaction(payment.tx, payment.meta);
      return payment;
    });
    const [first, newest, middle] = payments.map((p) => p.signature);
    const address = wallet.publicKey.toBase58();
    const listed = await client().signaturesFor(address, 10);
    if (listed.kind !== "found") throw new Error(JSON.stringify(listed));
    expect(listed.signatures.map((s) => s.signature)).toEqual([first, middle, newest]);
    expect(listed.signatures[1]).toEqual({ signature: middle, slot: 330_001_001, failed: true, blockTimeMs: DEFAULT_BLOCK_TIME_MS });
    expect(await client().signaturesFor(address, 2)).toMatchObject({ kind: "found", signatures: [{ signature: middle }, { signature: newest }] });
    // until: only the newer ones, as the deposit watcher reads the treasury from where it left off.
    expect(await client().signaturesFor(address, 10, first)).toMatchObject({ kind: "found", signatures: [{ signature: middle }, { signature: newest }] });
    expect(await client().signaturesFor(address, 10, newest)).toEqual({ kind: "found", signatures: [] });

    const confirmedOnly = makeUsdcPayment({ payer: wallet, treasuryOwner: treasury, amountBaseUnits: 1n, slot: 330_001_003, commitment: "confirmed" });
    rpc.addTransaction(confirmedOnly.tx, confirmedOnly.meta);
    expect(await client("finalized").signaturesFor(address, 10)).toMatchObject({ signatures: { length: 3 } });
    expect(await client("confirmed").signaturesFor(address, 10)).toMatchObject({ signatures: { length: 4 } });
  });

  it("answers no transactions for a malformed address without asking the node, and unavailable when the node fails", async () => {
    const before = rpc.calls.length;
    expect(await client().signaturesFor("not-an-address", 10)).toEqual({ kind: "found", signatures: [] });
    expect(rpc.calls.length).toBe(before);
    rpc.setRpcError({ code: -32005, message: "Node is behind by 12 slots" });
    expect(await client().signaturesFor(treasury.toBase58(), 10)).toEqual({
      kind: "unavailable",
      reason: "RPC answered error -32005: failed to get signatures for address: Node is behind by 12 slots",
    });
  });
});
