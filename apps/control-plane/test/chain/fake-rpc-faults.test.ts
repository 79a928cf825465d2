import { createTransferCheckedInstruction, getAccount, getAssociatedTokenAddressSync, getMint } from "@solana/spl-token";
import {
  Connection,
  Keypair,
  PublicKey,
  SendTransactionError,
  SolanaJSONRPCError,
  Transaction,
  TransactionExpiredBlockheightExceededError,
  TransactionMessage,
  VersionedTransaction,
} from "@solana/web3.js";
import bs58 from "bs58";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import type { FakeSolanaRpc } from "../support/fake-solana-rpc";
import { startFakeSolanaRpc } from "../support/fake-solana-rpc";
import { makeUsdcPayment, USDC_MINT } from "../support/solana-fixtures";

// What a Solana Pay flow reads besides transactions (accounts), what it finds them by
// (every account key), and each fault a test can inject, all through the real clients.

let rpc: FakeSolanaRpc;
let connection: Connection;
beforeAll(async () => {
  rpc = await startFakeSolanaRpc();
  // A client that gives up after a second: what a "no answer" fault is met with.
  const timedFetch: typeof fetch = (input, init) => fetch(input, { ...init, signal: AbortSignal.timeout(1_000) });
  connection = new Connection(rpc.url, { commitment: "confirmed", fetch: timedFetch, disableRetryOnRateLimit: true });
});
afterEach(() => rpc.heal());
afterAll(async () => {
  await rpc.close();
});

const treasury = Keypair.generate().publicKey;
const treasuryAccount = getAssociatedTokenAddressSync(USDC_MINT, treasury);
function funded(usdc: bigint) {
  const owner = Keypair.generate();
  const account = rpc.fundTokenAccount({ owner: owner.publicKey, mint: USDC_MINT, decimals: 6, amountBaseUnits: usdc * 1_000_000n });
  rpc.fundTokenAccount({ owner: treasury, mint: USDC_MINT, decimals: 6, amountBaseUnits: 0n });
  return { owner, account };
}
async function signedPayment(from: { owner: Keypair; account: PublicKey }, amountBaseUnits: bigint): Promise<VersionedTransaction> {
  const { blockhash } = await connection.getLatestBlockhash();
  const instructions = [createTransferCheckedInstruction(from.account, USDC_MINT, treasuryAccount, from.owner.publicKey, amountBaseUnits, 6)];
  const tx = new VersionedTransaction(
    new TransactionMessage({ payerKey: from.owner.publicKey, recentBlockhash: blockhash, instructions }).compileToV0Message(),
  );
  tx.sign([from.owner]);
  return tx;
}
const signatureOf = (tx: VersionedTransaction) => bs58.encode(tx.signatures[0]!);

describe("accounts", () => {
  it("serves mints, token accounts and their owners' wallets as spl-token reads them; null for anything else", async () => {
    const payer = funded(7n);
    // A mint of this test's own, so its supply is what this test funded.
    const ownMint = Keypair.generate().publicKey;
    for (const amountBaseUnits of [500n, 250n]) rpc.fundTokenAccount({ owner: Keypair.generate().publicKey, mint: ownMint, decimals: 2, amountBaseUnits });
    expect(await getMint(connection, ownMint)).toMatchObject({ decimals: 2, supply: 750n, isInitialized: true, mintAuthority: null, freezeAuthority: null });
    const account = await getAccount(connection, payer.account);
    expect(account).toMatchObject({ mint: USDC_MINT, owner: payer.owner.publicKey, amount: 7_000_000n, isInitialized: true, isFrozen: false });

    const wallet = await connection.getAccountInfo(payer.owner.publicKey);
    expect(wallet).toMatchObject({ executable: false, lamports: 1_000_000_000, data: Buffer.alloc(0) });
    expect(wallet?.owner.toBase58()).toBe("11111111111111111111111111111111");
    expect(await connection.getAccountInfo(Keypair.generate().publicKey)).toBeNull();
    const many = await connection.getMultipleAccountsInfo([payer.account, Keypair.generate().publicKey]);
    expect(many.map((a) => a?.data.length ?? null)).toEqual([165, null]);
  });

  it("answers jsonParsed as the node parses spl-token accounts", async () => {
    const payer = funded(3n);
    const parsed = await connection.getParsedAccountInfo(payer.account);
    expect(parsed.value?.data).toEqual({
      parsed: {
        info: {
          isNative: false,
          mint: USDC_MINT.toBase58(),
          owner: payer.owner.publicKey.toBase58(),
          state: "initialized",
          tokenAmount: { amount: "3000000", decimals: 6, uiAmount: 3, uiAmountString: "3" },
        },
        type: "account",
      },
      program: "spl-token",
      space: 165,
    });
    expect((await connection.getParsedAccountInfo(USDC_MINT)).value?.data).toMatchObject({ parsed: { type: "mint", info: { decimals: 6 } }, space: 82 });
    // A wallet's empty data cannot be parsed: the node falls back to base64.
    expect((await connection.getParsedAccountInfo(payer.owner.publicKey)).value?.data).toEqual(Buffer.alloc(0));
  });
});

describe("getSignaturesForAddress", () => {
  it("indexes every account key: a read-only non-signer, and addresses loaded from a lookup table", async () => {
    const payer = funded(5n);
    const readOnly = Keypair.generate().publicKey;
    const loaded = Keypair.generate().publicKey.toBase58();
    const transfer = createTransferCheckedInstruction(payer.account, USDC_MINT, treasuryAccount, payer.owner.publicKey, 1n, 6);
    transfer.keys.push({ pubkey: readOnly, isSigner: false, isWritable: false });
    const { blockhash } = await connection.getLatestBlockhash();
    const signature = await connection.sendTransaction(new Transaction({ feePayer: payer.owner.publicKey, recentBlockhash: blockhash }).add(transfer), [
      payer.owner,
    ]);
    expect((await connection.getSignaturesForAddress(readOnly)).map((s) => s.signature)).toEqual([signature]);

    const other = makeUsdcPayment({ payer: Keypair.generate(), treasuryOwner: treasury, amountBaseUnits: 1n, version: 0 });
    rpc.addTransaction(other.tx, { ...other.meta, loadedAddresses: { writable: [], readonly: [loaded] } });
    expect((await connection.getSignaturesForAddress(new PublicKey(loaded))).map((s) => s.signature)).toEqual([other.signature]);
  });

  it("refuses a commitment below confirmed", async () => {
    const response = await fetch(rpc.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "getSignaturesForAddress", params: [treasury.toBase58(), { commitment: "processed" }] }),
    });
    expect(await response.json()).toEqual({
      jsonrpc: "2.0",
      error: { code: -32602, message: "Method does not support commitment below `confirmed`" },
      id: 1,
    });
  });
});

describe("faults", () => {
  it("error: the JSON-RPC error shape, for the number of calls asked, then the real answer", async () => {
    rpc.fail("getAccountInfo", { kind: "error", error: { code: -32005, message: "Node is behind by 42 slots", data: { numSlotsBehind: 42 } } }, 2);
    for (let i = 0; i < 2; i++) {
      const refused = await connection.getAccountInfoAndContext(treasury).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(SolanaJSONRPCError);
      expect(refused).toMatchObject({ code: -32005, data: { numSlotsBehind: 42 } });
    }
    expect(await connection.getAccountInfo(treasury)).toMatchObject({ lamports: 1_000_000_000 });
  });

  it("no-answer: the call does nothing and only the client's timeout ends it", async () => {
    const payer = funded(2n);
    const tx = await signedPayment(payer, 1_000_000n);
    rpc.fail("sendTransaction", { kind: "no-answer" }, 1);
    await expect(connection.sendTransaction(tx)).rejects.toMatchObject({ name: "TimeoutError" });
    expect(rpc.tokenBalance(payer.account)).toBe(2_000_000n);
    expect((await connection.getSignatureStatus(signatureOf(tx))).value).toBeNull();
  });

  it("lost-answer: the transaction lands though its sender never hears so", async () => {
    const payer = funded(2n);
    const tx = await signedPayment(payer, 1_000_000n);
    rpc.fail("sendTransaction", { kind: "lost-answer" }, 1);
    await expect(connection.sendTransaction(tx)).rejects.toMatchObject({ name: "TimeoutError" });
    expect(rpc.tokenBalance(payer.account)).toBe(1_000_000n);
    expect((await connection.getSignatureStatus(signatureOf(tx))).value).toMatchObject({ err: null, confirmationStatus: "finalized" });
  });

  it("blockhash-not-found: preflight refuses it as a node that no longer knows the blockhash; without preflight it is dropped", async () => {
    const payer = funded(2n);
    const tx = await signedPayment(payer, 1_000_000n);
    rpc.fail("sendTransaction", { kind: "blockhash-not-found" }, 2);
    const refused = await connection.sendTransaction(tx).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SendTransactionError);
    expect((refused as SendTransactionError).message).toContain("Blockhash not found");
    expect(await connection.sendTransaction(tx, { skipPreflight: true })).toBe(signatureOf(tx));
    expect((await connection.getSignatureStatus(signatureOf(tx))).value).toBeNull();
    expect(rpc.tokenBalance(payer.account)).toBe(2_000_000n);
    // Once the fault is spent the same transaction lands.
    await connection.sendTransaction(tx);
    expect(rpc.tokenBalance(payer.account)).toBe(1_000_000n);
  });

  it("dropped: answered with the signature, never landed", async () => {
    const payer = funded(2n);
    const tx = await signedPayment(payer, 1_000_000n);
    rpc.fail("sendTransaction", { kind: "dropped" });
    expect(await connection.sendTransaction(tx)).toBe(signatureOf(tx));
    expect((await connection.getSignatureStatus(signatureOf(tx))).value).toBeNull();
    expect(rpc.tokenBalance(payer.account)).toBe(2_000_000n);
    expect(rpc.sent).toContain(signatureOf(tx));
  });

  it("dropped, then 151 blocks: the blockhash expires, so a client waiting on it learns the transaction can never land", async () => {
    const payer = funded(2n);
    const latest = await connection.getLatestBlockhash();
    const tx = await signedPayment(payer, 1_000_000n);
    expect(tx.message.recentBlockhash).toBe(latest.blockhash);
    rpc.fail("sendTransaction", { kind: "dropped" }, 1);
    const signature = await connection.sendTransaction(tx);
    rpc.advanceBlocks(151);
    expect(await connection.getBlockHeight()).toBeGreaterThan(latest.lastValidBlockHeight);
    expect((await connection.isBlockhashValid(latest.blockhash)).value).toBe(false);
    await expect(connection.confirmTransaction({ signature, ...latest }, "confirmed")).rejects.toThrow(TransactionExpiredBlockheightExceededError);
    await expect(connection.sendTransaction(tx)).rejects.toThrow("Blockhash not found");
    expect(rpc.tokenBalance(payer.account)).toBe(2_000_000n);
  });

  it("pubsub: an error answers the subscription; lost-answer acknowledges it and never notifies", async () => {
    const payer = funded(2n);
    const tx = await signedPayment(payer, 1_000_000n);
    const signature = signatureOf(tx);
    const socket = new WebSocket(rpc.wsUrl);
    const frames: unknown[] = [];
    let arrived: () => void = () => {};
    socket.on("message", (m) => {
      frames.push(JSON.parse(String(m)));
      arrived();
    });
    const frameCount = (n: number) =>
      new Promise<void>((resolve) => {
        arrived = () => frames.length >= n && resolve();
        arrived();
      });
    await new Promise((open) => socket.once("open", open));
    const subscribe = (id: number) =>
      socket.send(JSON.stringify({ jsonrpc: "2.0", id, method: "signatureSubscribe", params: [signature, { commitment: "confirmed" }] }));
    try {
      rpc.fail("signatureSubscribe", { kind: "error", error: { code: -32603, message: "Internal error" } }, 1);
      let next = frameCount(1);
      subscribe(1);
      await next;
      expect(frames[0]).toEqual({ jsonrpc: "2.0", error: { code: -32603, message: "Internal error" }, id: 1 });

      rpc.fail("signatureSubscribe", { kind: "lost-answer" }, 1);
      next = frameCount(3);
      subscribe(2);
      subscribe(3);
      await next;
      next = frameCount(4);
      await connection.sendRawTransaction(tx.serialize());
      await next;
      const [silent, heard] = [frames[1], frames[2]] as Array<{ result: number; id: number }>;
      expect([silent?.id, heard?.id]).toEqual([2, 3]);
      // Subscriptions are notified in the order they were made: the silent one would have come first.
      expect(frames[3]).toMatchObject({ method: "signatureNotification", params: { subscription: heard?.result } });
      expect(frames).toHaveLength(4);
    } finally {
      socket.close();
    }
  });
});
