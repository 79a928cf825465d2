import { Connection, Keypair, VersionedTransaction } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakeSolanaRpc } from "../support/fake-solana-rpc";
import { startFakeSolanaRpc, uiTokenAmount } from "../support/fake-solana-rpc";
import type { FixturePayment } from "../support/solana-fixtures";
import { makeUsdcPayment, USDC_MINT } from "../support/solana-fixtures";

// The fake's answers must pass @solana/web3.js's own response validation and decode
// back into the very bytes that were signed: that is what makes the other tests honest.

let rpc: FakeSolanaRpc;
let connection: Connection;
beforeAll(async () => {
  rpc = await startFakeSolanaRpc();
  connection = new Connection(rpc.url, "confirmed");
});
afterAll(async () => {
  await rpc.close();
});

const payer = Keypair.generate();
const treasury = Keypair.generate().publicKey;

async function rawCall(method: string, params: unknown[]): Promise<{ result?: any; error?: { code: number; message: string } }> {
  const response = await fetch(rpc.url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: "t1", method, params }),
  });
  const body = await response.json();
  expect(body).toMatchObject({ jsonrpc: "2.0", id: "t1" });
  return body;
}

function landed(version: "legacy" | 0, kind: "transfer" | "transferChecked" = "transfer"): FixturePayment {
  const payment = makeUsdcPayment({ payer, treasuryOwner: treasury, amountBaseUnits: 2_000_000n, version, kind });
  rpc.addTransaction(payment.tx, payment.meta);
  return payment;
}

const signedBytes = (payment: FixturePayment) => Buffer.from(payment.tx.serialize());

describe.each(["legacy", 0] as const)("getTransaction of a version %s transaction", (version) => {
  it("base64 decodes back into the signed transaction", async () => {
    const payment = landed(version);
    const { result } = await rawCall("getTransaction", [payment.signature, { encoding: "base64", maxSupportedTransactionVersion: 0 }]);
    expect(result.transaction[1]).toBe("base64");
    const decoded = VersionedTransaction.deserialize(Buffer.from(result.transaction[0], "base64"));
    expect(Buffer.from(decoded.serialize())).toEqual(signedBytes(payment));
    expect(result).toMatchObject({ slot: payment.meta.slot, version, meta: { err: null, status: { Ok: null }, fee: 5000 } });
  });

  it("json passes web3's validation and rebuilds the signed message", async () => {
    const payment = landed(version, "transferChecked");
    const response = await connection.getTransaction(payment.signature, { maxSupportedTransactionVersion: 0 });
    if (!response) throw new Error("missing transaction");
    const original = VersionedTransaction.deserialize(signedBytes(payment));
    expect(Buffer.from(response.transaction.message.serialize())).toEqual(Buffer.from(original.message.serialize()));
    expect(response.version).toBe(version);
    expect(response.meta?.loadedAddresses).toEqual({ writable: [], readonly: [] });

    const { result } = await rawCall("getTransaction", [payment.signature, { encoding: "json", maxSupportedTransactionVersion: 0 }]);
    expect(result.transaction.message.instructions[0]).toMatchObject({ programIdIndex: expect.any(Number), stackHeight: null });
    expect("addressTableLookups" in result.transaction.message).toBe(version === 0);
  });

  it("jsonParsed names accounts and parses the token transfer", async () => {
    const payment = landed(version);
    const { result } = await rawCall("getTransaction", [payment.signature, { encoding: "jsonParsed", maxSupportedTransactionVersion: 0 }]);
    const message = result.transaction.message;
    expect(message.accountKeys[0]).toEqual({ pubkey: payer.publicKey.toBase58(), signer: true, source: "transaction", writable: true });
    expect(message.instructions).toEqual([
      {
        parsed: {
          info: {
            amount: "2000000",
            authority: payer.publicKey.toBase58(),
            destination: payment.destinationTokenAccount.toBase58(),
            source: payment.sourceTokenAccount.toBase58(),
          },
          type: "transfer",
        },
        program: "spl-token",
        programId: "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA",
        stackHeight: null,
      },
    ]);
    expect(result.meta.postTokenBalances).toContainEqual({
      accountIndex: expect.any(Number),
      mint: USDC_MINT.toBase58(),
      owner: treasury.toBase58(),
      programId: "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA",
      uiTokenAmount: { amount: "27000000", decimals: 6, uiAmount: 27, uiAmountString: "27" },
    });
    // jsonParsed folds loaded addresses into accountKeys, as the node does.
    expect(result.meta.loadedAddresses).toBeUndefined();
    expect(await connection.getParsedTransaction(payment.signature, { maxSupportedTransactionVersion: 0 })).not.toBeNull();
  });
});

describe("getTransaction edge answers", () => {
  it("refuses a v0 transaction to a client that did not opt in, and omits version for legacy", async () => {
    const v0 = landed(0);
    const refused = await rawCall("getTransaction", [v0.signature, { encoding: "json" }]);
    expect(refused.error?.code).toBe(-32015);
    const legacy = landed("legacy");
    const { result } = await rawCall("getTransaction", [legacy.signature, "json"]);
    expect(result).not.toHaveProperty("version");
  });

  it("rejects a commitment below confirmed and a malformed signature", async () => {
    const payment = landed("legacy");
    expect((await rawCall("getTransaction", [payment.signature, { commitment: "processed" }])).error?.code).toBe(-32602);
    expect((await rawCall("getTransaction", ["abc", { encoding: "json" }])).error).toEqual({ code: -32602, message: "Invalid param: Invalid" });
  });

  it("answers null for an unknown signature", async () => {
    const unknown = makeUsdcPayment({ payer, treasuryOwner: treasury, amountBaseUnits: 1n });
    expect(await rawCall("getTransaction", [unknown.signature, { encoding: "json" }])).toMatchObject({ result: null });
  });
});

describe("other methods", () => {
  it("answers signature statuses, blockhash, slot, version and health in web3's shapes", async () => {
    const payment = makeUsdcPayment({ payer, treasuryOwner: treasury, amountBaseUnits: 1n, commitment: "confirmed", failed: true });
    rpc.addTransaction(payment.tx, payment.meta);
    const unknown = makeUsdcPayment({ payer, treasuryOwner: treasury, amountBaseUnits: 1n });

    const statuses = await connection.getSignatureStatuses([payment.signature, unknown.signature]);
    expect(statuses.value).toEqual([
      { slot: payment.meta.slot, confirmations: 1, err: payment.meta.err, status: { Err: payment.meta.err }, confirmationStatus: "confirmed" },
      null,
    ]);
    const { blockhash, lastValidBlockHeight } = await connection.getLatestBlockhash();
    expect(blockhash).toMatch(/^[1-9A-HJ-NP-Za-km-z]{32,44}$/);
    expect(lastValidBlockHeight).toBeGreaterThan(0);
    expect(await connection.getSlot()).toBeGreaterThan(payment.meta.slot);
    expect((await connection.getVersion())["solana-core"]).toMatch(/^\d+\.\d+\.\d+$/);
    expect(await rawCall("getHealth", [])).toMatchObject({ result: "ok" });
  });

  it("answers Method not found for anything else", async () => {
    expect((await rawCall("getBalance", [payer.publicKey.toBase58()])).error).toEqual({ code: -32601, message: "Method not found" });
  });
});

describe("uiTokenAmount", () => {
  it("formats base units exactly as the node does", () => {
    expect(uiTokenAmount(0n, 6)).toEqual({ amount: "0", decimals: 6, uiAmount: 0, uiAmountString: "0" });
    expect(uiTokenAmount(1_500_000n, 6)).toEqual({ amount: "1500000", decimals: 6, uiAmount: 1.5, uiAmountString: "1.5" });
    expect(uiTokenAmount(5n, 6).uiAmountString).toBe("0.000005");
    expect(uiTokenAmount(42n, 0).uiAmountString).toBe("42");
  });
});
