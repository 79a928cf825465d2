// Payouts in USDC, exactly once, against the local RPC with real signed
// transfers: each step of sending (the send, its answer, the confirmation, the
// blockhash) is broken in turn, and after each the chain shows one transfer per
// payout and the books add up.
import { describeEachDatabase } from "@cm/testkit";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Keypair, PublicKey, VersionedTransaction } from "@solana/web3.js";
import { afterAll, beforeAll, beforeEach, expect, it } from "vitest";
import { createWeb3PayoutChain } from "../../src/services/chain/web3-payout-chain";
import { type AgentHarness, startAgentHarness } from "../agents/support/agent-harness";
import { checkWholeBooks } from "../support/books";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../support/fake-solana-rpc";
import { operatorWithEarnings as earn, payoutKeyFile } from "../support/payouts";

const S = 1000;
const HOUR = 3600 * S;

describeEachDatabase("payouts on $name", (db) => {
  let h: AgentHarness;
  let rpc: FakeSolanaRpc;
  const hot = Keypair.generate();
  const mint = Keypair.generate().publicKey;
  const HOT_FUNDS = 1_000_000_000n; // 1,000 USDC
  const operators = new Set<string>();

  beforeAll(async () => {
    rpc = await startFakeSolanaRpc();
    rpc.fundTokenAccount({ owner: hot.publicKey, mint, decimals: 6, amountBaseUnits: HOT_FUNDS });
    h = await startAgentHarness(
      db,
      {
        PAYOUT_KEYPAIR: payoutKeyFile(hot),
        SOLANA_RPC_URL: rpc.url,
        STABLE_MINT: mint.toBase58(),
        EARNINGS_HOLD_HOURS: 0,
        PAYOUT_MIN_CREDITS: 10,
      },
      // A lost answer costs the client its timeout: short here.
      { payoutChain: createWeb3PayoutChain({ rpcUrl: rpc.url, commitment: "confirmed", requestTimeoutMs: 300 }) },
    );
  });
  afterAll(async () => {
    await h?.close();
    await rpc?.close();
  });
  beforeEach(() => rpc.heal());

  /** An operator whose node earned `minutes` x 90 credits, all available (no hold here). */
  async function operatorWithEarnings(minutes: number) {
    const op = await earn(h, minutes);
    operators.add(op.user.id);
    return op;
  }
  const earnings = async (token: string) => (await h.call("GET", "/operator/earnings", { token })).json.earnings;
  const request = (token: string, amountCredits: number) => h.call("POST", "/operator/payouts", { token, body: { amountCredits } });
  const payout = async (token: string, id: string) => (await h.call("GET", `/operator/payouts/${id}`, { token })).json.payout;
  const received = (wallet: string) => rpc.tokenBalance(getAssociatedTokenAddressSync(mint, new PublicKey(wallet), true)) ?? 0n;
  const tick = () => h.deps.payoutSender!.tick();
  const approve = (id: string) => h.deps.repos.payouts.approve(id, h.clock.now());
  /** The invariants after every scenario. */
  async function checkMoney() {
    await checkWholeBooks(h.deps.repos);
    const books = await h.deps.repos.earnings.books();
    expect(books.usageMicro - books.refundsMicro).toBe(books.operatorMicro + books.platformMicro);
    const paid = await h.deps.repos.payouts.books();
    let split = 0;
    for (const id of operators) {
      const s = await h.deps.repos.earnings.summary(id, h.clock.now(), 0, 1);
      for (const part of [s.pendingMicro, s.availableMicro, s.inFlightMicro, s.paidMicro]) expect(part).toBeGreaterThanOrEqual(0);
      expect(s.pendingMicro + s.availableMicro + s.inFlightMicro + s.paidMicro).toBe(s.totalMicro);
      split += s.totalMicro;
    }
    expect(split).toBe(books.operatorMicro);
    // What left the hot wallet is exactly what was paid.
    expect(HOT_FUNDS - (rpc.tokenBalance(getAssociatedTokenAddressSync(mint, hot.publicKey, true)) ?? 0n)).toBe(BigInt(paid.paidMicro / 100));
  }

  it("takes a request out of available earnings, waits for approval, then pays it once to the operator's wallet", async () => {
    const op = await operatorWithEarnings(1);
    expect(await earnings(op.token)).toMatchObject({ available: 90, payingOut: 0, paidOut: 0 });

    const below = await request(op.token, 5);
    expect(below.status).toBe(422);
    expect(below.json.error).toMatchObject({ code: "PAYOUT_BELOW_MINIMUM", details: { minimumCredits: 10 } });
    const tooMuch = await request(op.token, 91);
    expect(tooMuch.status).toBe(422);
    expect(tooMuch.json.error).toMatchObject({ code: "INSUFFICIENT_EARNINGS", details: { availableCredits: 90 } });

    const r = await request(op.token, 60);
    expect(r.status).toBe(201);
    const id = r.json.payout.id as string;
    expect(r.json.payout).toMatchObject({
      status: "requested",
      amountCredits: 60,
      amountStable: 0.6,
      walletAddress: op.wallet.address,
      error: expect.stringContaining("waiting for an administrator"),
    });
    expect(await earnings(op.token)).toMatchObject({ available: 30, payingOut: 60, paidOut: 0 });
    // The same credits cannot be asked for twice.
    expect((await request(op.token, 31)).json.error.code).toBe("INSUFFICIENT_EARNINGS");

    // PAYOUTS=manual: nothing is sent until an administrator approves it.
    await tick();
    expect(await payout(op.token, id)).toMatchObject({ status: "requested" });
    expect(rpc.sent).toHaveLength(0);
    await approve(id);
    await tick();
    expect(await payout(op.token, id)).toMatchObject({ status: "sending" });
    await tick();
    const paid = await payout(op.token, id);
    expect(paid).toMatchObject({ status: "paid", amountCredits: 60 });
    expect(paid.txSignature).toBe(rpc.sent[0]);
    expect(received(op.wallet.address)).toBe(600_000n);
    expect(await earnings(op.token)).toMatchObject({ available: 30, payingOut: 0, paidOut: 60 });
    const list = (await h.call("GET", "/operator/payouts", { token: op.token })).json;
    expect(list.payouts.map((p: { id: string }) => p.id)).toEqual([id]);
    expect(list.pagination).toMatchObject({ total: 1 });
    // Another operator sees none of it.
    const other = await h.signIn();
    expect((await h.call("GET", `/operator/payouts/${id}`, { token: other.token })).json.error.code).toBe("PAYOUT_NOT_FOUND");
    await checkMoney();
  });

  /** An approved payout of `credits` from a fresh operator, and a way to count the transfers that landed for it. */
  async function approvedPayout(credits = 20) {
    const op = await operatorWithEarnings(1);
    const r = await request(op.token, credits);
    expect(r.status).toBe(201);
    const id = r.json.payout.id as string;
    await approve(id);
    const sentBefore = rpc.sent.length;
    return { op, id, sentSince: () => rpc.sent.slice(sentBefore) };
  }
  /** Turns of the sender until the payout is paid (each turn of a real sender is PAYOUT_SEND_INTERVAL_MS apart). */
  async function untilPaid(token: string, id: string, turns = 6) {
    for (let i = 0; i < turns && (await payout(token, id)).status !== "paid"; i++) await tick();
    return payout(token, id);
  }
  /** The signatures of landed transfers paying this operator's wallet. */
  function landedTo(wallet: string): string[] {
    const ata = getAssociatedTokenAddressSync(mint, new PublicKey(wallet), true).toBase58();
    return rpc
      .landedTransfers()
      .filter((t) => t.destination === ata)
      .map((t) => t.signature);
  }

  it("pays once when the send fails: the recorded transfer is sent again", async () => {
    const { op, id } = await approvedPayout();
    rpc.fail("sendTransaction", { kind: "error", error: { code: -32005, message: "Node is behind by 42 slots" } }, 1);
    await tick();
    expect(await payout(op.token, id)).toMatchObject({ status: "sending", error: expect.stringContaining("Node is behind") });
    const p = await untilPaid(op.token, id);
    expect(p.status).toBe("paid");
    expect(landedTo(op.wallet.address)).toEqual([p.txSignature]);
    expect(received(op.wallet.address)).toBe(200_000n);
    await checkMoney();
  });

  it("pays once when the send's answer is lost after it landed", async () => {
    const { op, id } = await approvedPayout();
    rpc.fail("sendTransaction", { kind: "lost-answer" }, 1);
    await tick();
    const p = await untilPaid(op.token, id);
    expect(p.status).toBe("paid");
    expect(landedTo(op.wallet.address)).toEqual([p.txSignature]);
    await checkMoney();
  });

  it("pays once when the RPC answers 'blockhash not found': the same transfer again while valid, a new one only once it expired", async () => {
    const { op, id } = await approvedPayout();
    rpc.fail("sendTransaction", { kind: "blockhash-not-found" });
    await tick();
    await tick();
    const first = await payout(op.token, id);
    expect(first).toMatchObject({ status: "sending", error: expect.stringContaining("Blockhash not found") });
    // Still valid by the chain's height: no second transfer is signed, however many turns.
    await tick();
    expect((await payout(op.token, id)).txSignature).toBe(first.txSignature);
    rpc.advanceBlocks(200);
    rpc.heal("sendTransaction");
    const p = await untilPaid(op.token, id);
    expect(p.status).toBe("paid");
    expect(p.txSignature).not.toBe(first.txSignature);
    expect(landedTo(op.wallet.address)).toEqual([p.txSignature]);
    expect((await h.deps.repos.payouts.get(id))!.earlierSignatures).toBe(first.txSignature);
    await checkMoney();
  });

  it("pays once when the confirmation never comes: nothing new is built while the chain cannot be asked", async () => {
    const { op, id } = await approvedPayout();
    rpc.fail("getSignatureStatuses", { kind: "error", error: { code: -32603, message: "Internal error" } });
    await tick(); // signed, recorded, sent: it landed
    rpc.advanceBlocks(200);
    for (let i = 0; i < 3; i++) await tick();
    const waiting = await payout(op.token, id);
    expect(waiting).toMatchObject({ status: "sending", error: expect.stringContaining("Internal error") });
    rpc.heal();
    const p = await untilPaid(op.token, id);
    expect(p).toMatchObject({ status: "paid", txSignature: waiting.txSignature });
    expect(landedTo(op.wallet.address)).toEqual([p.txSignature]);
    await checkMoney();
  });

  it("pays once when a sent transfer is dropped: a new one after the first expired unseen", async () => {
    const { op, id } = await approvedPayout();
    rpc.fail("sendTransaction", { kind: "dropped" });
    await tick();
    await tick();
    const first = (await payout(op.token, id)).txSignature;
    rpc.advanceBlocks(200);
    rpc.heal();
    const p = await untilPaid(op.token, id);
    expect(p.status).toBe("paid");
    expect(p.txSignature).not.toBe(first);
    expect(landedTo(op.wallet.address)).toEqual([p.txSignature]);
    await checkMoney();
  });

  it("never signs a second transfer on an 'unknown' from an RPC node behind the one that gave the height", async () => {
    const { op, id } = await approvedPayout();
    rpc.fail("sendTransaction", { kind: "lost-answer" }, 1);
    await tick(); // landed; its answer lost
    const landed = (await payout(op.token, id)).txSignature;
    rpc.advanceBlocks(200);
    // Behind a load balancer: the node asked about the signature has not seen its block.
    rpc.fail("getSignatureStatuses", { kind: "behind", slots: 1_000 });
    for (let i = 0; i < 3; i++) await tick();
    expect(await payout(op.token, id)).toMatchObject({ status: "sending", txSignature: landed, error: expect.stringContaining("behind") });
    rpc.heal();
    expect(await untilPaid(op.token, id)).toMatchObject({ status: "paid", txSignature: landed });
    expect(landedTo(op.wallet.address)).toEqual([landed]);
    await checkMoney();
  });

  it("waits while the transfer is only confirmed, however old its blockhash, and pays once it is finalized", async () => {
    const { op, id } = await approvedPayout();
    await tick();
    const sig = (await payout(op.token, id)).txSignature;
    rpc.setCommitment(sig, "confirmed");
    rpc.advanceBlocks(200);
    for (let i = 0; i < 3; i++) await tick();
    expect(await payout(op.token, id)).toMatchObject({ status: "sending", txSignature: sig });
    rpc.setCommitment(sig, "finalized");
    expect(await untilPaid(op.token, id)).toMatchObject({ status: "paid", txSignature: sig });
    expect(landedTo(op.wallet.address)).toEqual([sig]);
    await checkMoney();
  });

  it("signs a new transfer when the recorded one landed and failed on chain (nothing moved), and pays once", async () => {
    const { op, id } = await approvedPayout();
    rpc.fail("sendTransaction", { kind: "no-answer" }, 1);
    await tick();
    // The recorded transfer lands, failed (as a skipped preflight would let it): no tokens moved.
    const recorded = (await h.deps.repos.payouts.get(id))!;
    const failedTx = VersionedTransaction.deserialize(Buffer.from(recorded.signedTx!, "base64"));
    rpc.addTransaction(failedTx, {
      err: { InstructionError: [1, { Custom: 1 }] },
      fee: 5000,
      slot: 330_000_500,
      blockTimeSeconds: Math.floor(Date.now() / 1000),
      preTokenBalances: [],
      postTokenBalances: [],
    });
    const p = await untilPaid(op.token, id);
    expect(p, JSON.stringify(p)).toMatchObject({ status: "paid" });
    expect(p.txSignature).not.toBe(recorded.signature);
    expect((await h.deps.repos.payouts.get(id))!.earlierSignatures).toBe(recorded.signature);
    expect(landedTo(op.wallet.address)).toEqual([p.txSignature]);
    await checkMoney();
  });

  it("a refund racing a payout request never lets the operator withdraw what the refund took back", async () => {
    for (let round = 0; round < 3; round++) {
      const op = await operatorWithEarnings(1);
      const dep = (await h.deps.repos.earnings.list(op.user.id, 1, 1)).rows[0]!.deploymentId;
      const [refund, request_] = await Promise.all([
        h.deps.repos.billing.locked(dep, (tx, d) =>
          h.deps.repos.earnings.refund(tx, d, { amountMicro: 100_000_000, description: "refund: race", nowMs: h.clock.now(), ids: h.deps.ids }),
        ),
        request(op.token, 90),
      ]);
      expect(refund).toMatchObject({ ok: true });
      // Either the request saw the refund (refused) or the refund saw the payout (took it from the fee).
      if (request_.status === 201) expect(refund).toMatchObject({ fromOperatorMicro: 0, fromFeeMicro: 100_000_000 });
      else expect(request_.json.error.code).toBe("INSUFFICIENT_EARNINGS");
      await checkMoney();
      // Out of the way of the daily-limit test below, which approves the oldest first.
      if (request_.status === 201) expect(await h.deps.repos.payouts.reject(request_.json.payout.id, "test: done", h.clock.now())).toBeDefined();
    }
  });

  it("fails after five transfers that could not land, and gives the amount back to available", async () => {
    const { op, id } = await approvedPayout(15);
    const before = (await earnings(op.token)).available;
    rpc.fail("sendTransaction", { kind: "blockhash-not-found" });
    for (let i = 0; i < 12 && (await payout(op.token, id)).status !== "failed"; i++) {
      await tick();
      rpc.advanceBlocks(200);
    }
    const p = await payout(op.token, id);
    expect(p).toMatchObject({ status: "failed", error: expect.stringContaining("gave up after 5 transfers") });
    expect(landedTo(op.wallet.address)).toEqual([]);
    expect((await earnings(op.token)).available).toBe(before + 15);
    await checkMoney();
  });

  it("PAYOUTS=auto-style daily limit: approves oldest first within the limit, the rest the next day", async () => {
    // A day after the payouts the tests above approved: the limit's room is whole.
    h.clock.advance(24 * HOUR + 1);
    const a = await operatorWithEarnings(1);
    const b = await operatorWithEarnings(1);
    const ra = await request(a.token, 50);
    h.clock.advance(S);
    const rb = await request(b.token, 50);
    const approved = await h.deps.repos.payouts.approveWithinDailyLimit(h.clock.now(), 80_000_000, "waiting");
    expect(approved.map((p) => p.id)).toEqual([ra.json.payout.id]);
    expect(await h.deps.repos.payouts.approveWithinDailyLimit(h.clock.now(), 80_000_000, "waiting")).toEqual([]);
    h.clock.advance(24 * HOUR + 1);
    expect((await h.deps.repos.payouts.approveWithinDailyLimit(h.clock.now(), 80_000_000, "waiting")).map((p) => p.id)).toEqual([rb.json.payout.id]);
    expect((await untilPaid(a.token, ra.json.payout.id)).status).toBe("paid");
    expect((await untilPaid(b.token, rb.json.payout.id)).status).toBe("paid");
    await checkMoney();
  });
});
