import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sqliteDatabase } from "@cm/testkit";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentHarness, eventually, startAgentHarness } from "../../../apps/control-plane/test/agents/support/agent-harness";
import { SimAgent } from "../../../apps/control-plane/test/agents/support/sim-agent";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../../../apps/control-plane/test/support/fake-solana-rpc";
import { ApiError, type Client, createClient, keypairSigner, PayoutWaitError } from "../src";

// operator.payout and friends against a real control plane paying from a hot wallet
// through the tests' Solana RPC, which executes the signed transfers. The operator's
// earnings come from real metering: a tenant's deployment runs ten minutes on the
// operator's node at 600 cents an hour, 100 credits of usage: 90 earned after the 10% fee.

let h: AgentHarness;
let rpc: FakeSolanaRpc;
let agent: SimAgent;
let client: Client;
let keyDir: string;
const hotWallet = Keypair.generate();
const operatorWallet = Keypair.generate();
const mint = Keypair.generate().publicKey;
const MIN_CREDITS = 5;
const operatorTokens = () => rpc.tokenBalance(getAssociatedTokenAddressSync(mint, operatorWallet.publicKey));

beforeAll(async () => {
  rpc = await startFakeSolanaRpc();
  rpc.fundTokenAccount({ owner: hotWallet.publicKey, mint, decimals: 6, amountBaseUnits: 1_000n * 10n ** 6n });
  keyDir = mkdtempSync(join(tmpdir(), "cm-payout-key-"));
  const keyFile = join(keyDir, "hot-wallet.json");
  writeFileSync(keyFile, JSON.stringify(Array.from(hotWallet.secretKey)), { mode: 0o600 });
  h = await startAgentHarness(sqliteDatabase, {
    PAYOUT_KEYPAIR: keyFile,
    PAYOUTS: "auto",
    PAYOUT_MIN_CREDITS: MIN_CREDITS,
    EARNINGS_HOLD_HOURS: 0,
    SOLANA_RPC_URL: rpc.url,
    STABLE_MINT: mint.toBase58(),
  });
  client = createClient({ baseUrl: h.url });
  await client.auth.signIn(await keypairSigner(operatorWallet.secretKey));
  const { node, agentToken } = await client.operator.registerNode({
    name: "earner",
    region: "eu-west",
    country: "DE",
    hourlyRateCents: 600,
    maxDeployments: 2,
  });
  ({ agent } = await SimAgent.connect(h.url, agentToken, { gpus: 1 }));
  await eventually(async () => expect((await h.deps.repos.nodes.get(node.id))?.gpuCount).toBe(1));
  const tenant = await h.signIn();
  await h.grantCredits(tenant.user.id, 1_000);
  const d = await h.deploy(tenant.token, node.id, agent);
  await h.run(agent, d.spec, tenant.token);
  for (let minute = 0; minute < 10; minute++) {
    h.clock.advance(60_000);
    agent.heartbeat();
    await eventually(() => expect(h.deps.agents.lastSeenMs(node.id)).toBe(h.clock.now()));
    await h.deps.metering.tick();
  }
}, 60_000);
afterAll(async () => {
  await agent?.close();
  await h?.close();
  await rpc?.close();
  if (keyDir) rmSync(keyDir, { recursive: true, force: true });
});

/** The sender's turns, one after another (the harness runs no timers), until `work` settles. */
async function whileSending<T>(work: Promise<T>, eachTurn: () => void = () => {}): Promise<T> {
  let settled = false;
  const done = work.finally(() => {
    settled = true;
  });
  done.catch(() => {});
  while (!settled) {
    await h.deps.payoutSender!.tick();
    eachTurn();
    await new Promise((r) => setTimeout(r, 10));
  }
  return done;
}

describe("operator payouts", () => {
  it("pays a payout in USDC to the operator's wallet: requested, then paid with its signature, listed, and the earnings moved", async () => {
    expect((await client.operator.earnings()).earnings).toMatchObject({ pending: 0, available: 90, payingOut: 0, paidOut: 0 });
    const requested = await client.operator.payout(30);
    expect(requested).toMatchObject({ amountCredits: 30, amountStable: 0.3, stableMint: mint.toBase58(), walletAddress: operatorWallet.publicKey.toBase58() });
    expect(["requested", "sending"]).toContain(requested.status);

    const seen: string[] = [];
    const paid = await whileSending(client.operator.waitForPayout(requested.id, { intervalMs: 20, onChange: (p) => seen.push(p.status) }));
    expect(paid).toMatchObject({ id: requested.id, status: "paid", txSignature: expect.any(String), paidAt: expect.any(String) });
    expect(seen.at(-1)).toBe("paid");
    expect(rpc.sent).toContain(paid.txSignature);
    // 30 credits = 0.30 USDC = 300,000 base units, in the operator's own token account.
    expect(operatorTokens()).toBe(300_000n);

    expect(await client.operator.getPayout(requested.id)).toEqual(paid);
    const { payouts, pagination } = await client.operator.payouts({ page: 1, limit: 10 });
    expect(payouts).toEqual([paid]);
    expect(pagination).toMatchObject({ page: 1, total: 1 });
    expect((await client.operator.earnings()).earnings).toMatchObject({ available: 60, payingOut: 0, paidOut: 30 });
  });

  it("refuses a payout below PAYOUT_MIN_CREDITS or above what is available, naming the minimum and what is available", async () => {
    const { available } = (await client.operator.earnings()).earnings;
    const below = await client.operator.payout(MIN_CREDITS - 1).catch((e: unknown) => e);
    expect(below).toBeInstanceOf(ApiError);
    expect(below).toMatchObject({ code: "PAYOUT_BELOW_MINIMUM", status: 422, details: { minimumCredits: MIN_CREDITS } });
    const over = await client.operator.payout(available + 1).catch((e: unknown) => e);
    expect(over).toBeInstanceOf(ApiError);
    expect(over).toMatchObject({ code: "INSUFFICIENT_EARNINGS", details: { availableCredits: available } });
    expect((over as ApiError).message).toContain(`${available} are available`);
    expect(await client.operator.getPayout("pay_unknown").catch((e: unknown) => e)).toMatchObject({ code: "PAYOUT_NOT_FOUND", status: 404 });
    expect((await client.operator.payouts()).pagination.total).toBe(1);
  });

  it("throws PayoutWaitError WAIT_TIMEOUT while the RPC is down; the payout goes on and is paid once it is back", async () => {
    const before = operatorTokens()!;
    rpc.fail("getLatestBlockhash", { kind: "error", error: { code: -32005, message: "Node is behind" } });
    const requested = await client.operator.payout(MIN_CREDITS);
    await h.deps.payoutSender!.tick();
    const err = await client.operator.waitForPayout(requested.id, { timeoutMs: 50, intervalMs: 10 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PayoutWaitError);
    expect(err).toMatchObject({ code: "WAIT_TIMEOUT", payout: { id: requested.id, error: expect.stringContaining("Node is behind") } });
    expect((err as PayoutWaitError).message).toContain("Node is behind");
    expect((await client.operator.earnings()).earnings).toMatchObject({ payingOut: MIN_CREDITS });

    rpc.heal("getLatestBlockhash");
    expect(await whileSending(client.operator.waitForPayout(requested.id, { intervalMs: 20 }))).toMatchObject({ status: "paid" });
    expect(operatorTokens()).toBe(before + BigInt(MIN_CREDITS) * 10_000n);
  });

  it("answers a failed payout (nothing landed) with its error rather than throwing, and its credits are available again", async () => {
    const { available } = (await client.operator.earnings()).earnings;
    const before = operatorTokens();
    // Every transfer is taken and never included: each expires unseen, until the sender gives up.
    rpc.fail("sendTransaction", { kind: "dropped" });
    try {
      const requested = await client.operator.payout(MIN_CREDITS);
      const failed = await whileSending(client.operator.waitForPayout(requested.id, { intervalMs: 10 }), () => rpc.advanceBlocks(200));
      expect(failed).toMatchObject({ id: requested.id, status: "failed", error: expect.stringContaining("none landed") });
    } finally {
      rpc.heal("sendTransaction");
    }
    expect(operatorTokens()).toBe(before);
    expect((await client.operator.earnings()).earnings).toMatchObject({ available, payingOut: 0 });
  });
});
