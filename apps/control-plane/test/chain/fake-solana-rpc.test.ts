import { createAssociatedTokenAccountIdempotentInstruction, createTransferCheckedInstruction, getAssociatedTokenAddressSync } from "@solana/spl-token";
import {
  Connection,
  Keypair,
  type PublicKey,
  SendTransactionError,
  sendAndConfirmTransaction,
  Transaction,
  TransactionMessage,
  VersionedTransaction,
} from "@solana/web3.js";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { createWeb3ChainClient } from "../../src/services/chain/web3-chain-client";
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

describe("sending transactions", () => {
  const treasuryOwner = Keypair.generate().publicKey;
  const treasuryAccount = getAssociatedTokenAddressSync(USDC_MINT, treasuryOwner, true);
  const funded = (usdc: bigint) => {
    const owner = Keypair.generate();
    const account = rpc.fundTokenAccount({ owner: owner.publicKey, mint: USDC_MINT, decimals: 6, amountBaseUnits: usdc * 1_000_000n });
    return { owner, account };
  };
  /** A deposit as wallets build it: the treasury's account created idempotently, then transferChecked. */
  const deposit = (from: { owner: Keypair; account: PublicKey }, amountBaseUnits: bigint) => [
    createAssociatedTokenAccountIdempotentInstruction(from.owner.publicKey, treasuryAccount, treasuryOwner, USDC_MINT),
    createTransferCheckedInstruction(from.account, USDC_MINT, treasuryAccount, from.owner.publicKey, amountBaseUnits, 6),
  ];
  const signedV0 = async (from: { owner: Keypair; account: PublicKey }, amountBaseUnits: bigint, blockhash?: string) => {
    const recentBlockhash = blockhash ?? (await connection.getLatestBlockhash()).blockhash;
    const message = new TransactionMessage({
      payerKey: from.owner.publicKey,
      recentBlockhash,
      instructions: deposit(from, amountBaseUnits),
    }).compileToV0Message();
    const tx = new VersionedTransaction(message);
    tx.sign([from.owner]);
    return tx;
  };

  it("sendAndConfirmTransaction lands a real spl-token deposit through the signature subscription; the balances moved", async () => {
    const payer = funded(100n);
    const treasuryBefore = rpc.tokenBalance(treasuryAccount) ?? 0n;
    const signature = await sendAndConfirmTransaction(connection, new Transaction().add(...deposit(payer, 2_500_000n)), [payer.owner]);

    expect(rpc.calls.filter((c) => c.method === "signatureSubscribe").map((c) => c.params[0])).toContain(signature);
    expect((await connection.getTokenAccountBalance(payer.account)).value).toMatchObject({ amount: "97500000", uiAmountString: "97.5" });
    expect((await connection.getTokenAccountBalance(treasuryAccount)).value.amount).toBe(String(treasuryBefore + 2_500_000n));
    const landed = await connection.getParsedTransaction(signature, { maxSupportedTransactionVersion: 0 });
    expect(landed?.meta?.err).toBeNull();
    expect(landed?.transaction.message.instructions[1]).toMatchObject({ parsed: { type: "transferChecked", info: { tokenAmount: { amount: "2500000" } } } });
    // What the control plane's deposit check reads: the transfer to the treasury and the balance it gained.
    const seen = await createWeb3ChainClient({ rpcUrl: rpc.url, commitment: "finalized" }).getTransfer(signature);
    if (seen.kind !== "found") throw new Error(`the control plane does not see it: ${JSON.stringify(seen)}`);
    expect(seen.tx.transfers).toEqual([
      expect.objectContaining({ destination: treasuryAccount.toBase58(), destinationOwner: treasuryOwner.toBase58(), amountBaseUnits: 2_500_000n }),
    ]);
    expect(seen.tx.tokenBalanceDeltas).toContainEqual(expect.objectContaining({ owner: treasuryOwner.toBase58(), deltaBaseUnits: 2_500_000n }));
    expect((await connection.getSignaturesForAddress(treasuryAccount)).map((s) => s.signature)).toContain(signature);
  });

  it("takes a v0 transaction in base58, the node's default encoding, and reports it finalized", async () => {
    const payer = funded(10n);
    const tx = await signedV0(payer, 1_000_000n);
    const { result } = await rawCall("sendTransaction", [bs58.encode(tx.serialize())]);
    expect(result).toBe(bs58.encode(tx.signatures[0]!));
    expect((await connection.getSignatureStatus(result)).value).toMatchObject({ err: null, confirmationStatus: "finalized" });
    expect(rpc.tokenBalance(payer.account)).toBe(9_000_000n);
  });

  it("refuses a transaction tampered with after signing (-32003) and moves nothing; without preflight it is dropped", async () => {
    const payer = funded(10n);
    const tx = await signedV0(payer, 1_000_000n);
    // The amount of the transferChecked, raised after the payer signed.
    tx.message.compiledInstructions[1]!.data[1] = 0xff;
    const refused = await connection.sendRawTransaction(tx.serialize()).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SendTransactionError);
    expect((refused as Error).message).toContain("Transaction signature verification failure");
    const raw = await rawCall("sendTransaction", [Buffer.from(tx.serialize()).toString("base64"), { encoding: "base64" }]);
    expect(raw.error).toEqual({ code: -32003, message: "Transaction signature verification failure" });

    const dropped = await connection.sendRawTransaction(tx.serialize(), { skipPreflight: true });
    expect((await connection.getSignatureStatus(dropped)).value).toBeNull();
    expect(rpc.tokenBalance(payer.account)).toBe(10_000_000n);
  });

  it("refuses in preflight what the token program would (-32002 with the simulation), and lands it failed without preflight", async () => {
    const payer = funded(1n);
    const tx = await signedV0(payer, 5_000_000n);
    const raw = await rawCall("sendTransaction", [Buffer.from(tx.serialize()).toString("base64"), { encoding: "base64" }]);
    expect(raw.error).toMatchObject({
      code: -32002,
      message: "Transaction simulation failed: Error processing Instruction 1: custom program error: 0x1",
      data: { err: { InstructionError: [1, { Custom: 1 }] }, logs: expect.arrayContaining(["Program log: Error: insufficient funds"]) },
    });
    const failed = await connection.sendRawTransaction(tx.serialize(), { skipPreflight: true });
    expect((await connection.getSignatureStatus(failed)).value?.err).toEqual({ InstructionError: [1, { Custom: 1 }] });
    expect(rpc.tokenBalance(payer.account)).toBe(1_000_000n);
  });

  it("refuses an unknown blockhash and a replay, as preflight does", async () => {
    const payer = funded(10n);
    const stale = await signedV0(payer, 1n, Keypair.generate().publicKey.toBase58());
    expect((await rawCall("sendTransaction", [bs58.encode(stale.serialize())])).error).toMatchObject({ code: -32002, data: { err: "BlockhashNotFound" } });
    const tx = await signedV0(payer, 1n);
    expect(await connection.isBlockhashValid(tx.message.recentBlockhash)).toMatchObject({ value: true });
    await connection.sendRawTransaction(tx.serialize());
    expect((await rawCall("sendTransaction", [bs58.encode(tx.serialize())])).error).toMatchObject({
      code: -32002,
      message: "Transaction simulation failed: This transaction has already been processed",
    });
    expect((await rawCall("sendTransaction", ["not base58!"])).error?.code).toBe(-32602);
  });

  it("speaks the pubsub wire: a subscription id, one signatureNotification once it lands, then the subscription is gone", async () => {
    const payer = funded(10n);
    const tx = await signedV0(payer, 1_000_000n);
    const signature = bs58.encode(tx.signatures[0]!);
    const socket = new WebSocket(rpc.wsUrl);
    // Frames in arrival order, each taken once.
    const frames: Array<Promise<any>> = [];
    const waiting: Array<(frame: any) => void> = [];
    socket.on("message", (m) => {
      const frame = JSON.parse(String(m));
      const waiter = waiting.shift();
      if (waiter) waiter(frame);
      else frames.push(Promise.resolve(frame));
    });
    const next = () => frames.shift() ?? new Promise<any>((resolve) => waiting.push(resolve));
    await new Promise((open) => socket.once("open", open));
    try {
      socket.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "signatureSubscribe", params: [signature, { commitment: "confirmed" }] }));
      const subscribed = await next();
      expect(subscribed).toEqual({ jsonrpc: "2.0", result: expect.any(Number), id: 1 });
      await connection.sendRawTransaction(tx.serialize());
      expect(await next()).toEqual({
        jsonrpc: "2.0",
        method: "signatureNotification",
        params: { result: { context: { slot: expect.any(Number) }, value: { err: null } }, subscription: subscribed.result },
      });
      socket.send(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "signatureUnsubscribe", params: [subscribed.result] }));
      expect(await next()).toEqual({ jsonrpc: "2.0", error: { code: -32602, message: "Invalid subscription id." }, id: 2 });
    } finally {
      socket.close();
    }
  });
});

describe("the fake's ports", () => {
  it("takes another pair when the pubsub port (RPC port + 1) is taken, without an uncaught error", async () => {
    const { createServer } = await import("node:net");
    const { createFakePubsub } = await import("../support/fake-rpc-pubsub");
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, "127.0.0.1", r));
    const port = (taken.address() as { port: number }).port;
    const pubsub = createFakePubsub(
      () => undefined,
      () => {},
      () => undefined,
    );
    await expect(pubsub.listen(port)).rejects.toMatchObject({ code: "EADDRINUSE" });
    // Had the error escaped, vitest would report it as an unhandled error of this file.
    await new Promise((r) => setTimeout(r, 50));
    await pubsub.stop();
    await new Promise((r) => taken.close(r));
  });
});
