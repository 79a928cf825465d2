import { join } from "node:path";
import { createClient } from "@cm/sdk";
import { sqliteDatabase } from "@cm/testkit";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Connection, Keypair, PublicKey } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../../control-plane/test/support/fake-solana-rpc";
import { type Harness, startHarness, TestClock } from "../../control-plane/test/support/harness";
import { USDC_DECIMALS, USDC_MINT } from "../../control-plane/test/support/solana-fixtures";
import { configDir, FileSessionStore } from "../src/session-file";
import { terminal } from "./support/cli";

// `cm credits buy`: a real USDC transferChecked signed with the keypair, sent to the
// tests' Solana RPC, confirmed there, then confirmed by the control plane reading it back.

let h: Harness;
let rpc: FakeSolanaRpc;
let t: ReturnType<typeof terminal>;
let wallet: PublicKey;
const treasury = Keypair.generate().publicKey.toBase58();
beforeAll(async () => {
  rpc = await startFakeSolanaRpc();
  h = await startHarness(sqliteDatabase, {
    overrides: { clock: new TestClock(Date.now()) },
    config: { TREASURY_WALLET: treasury, SOLANA_RPC_URL: rpc.url, STABLE_MINT: USDC_MINT.toBase58() },
  });
  t = terminal({ CM_API_URL: h.url, SOLANA_RPC_URL: rpc.url });
  // The keypair's wallet holds 1,000 USDC on the tests' chain.
  wallet = new PublicKey(t.keypair().publicKey);
  rpc.fundTokenAccount({ owner: wallet, mint: USDC_MINT, decimals: USDC_DECIMALS, amountBaseUnits: 1_000_000_000n });
  expect((await t.cm(["login"])).code).toBe(0);
});
afterAll(async () => {
  t?.close();
  await h?.close();
  await rpc?.close();
});

describe("cm credits buy", () => {
  it("pays the package in USDC, confirms it and shows the new balance", async () => {
    const packages = JSON.parse((await t.cm(["credits", "packages", "--json"])).stdout).packages as Array<{ id: string; creditsToReceive: number }>;
    const pkg = packages[0]!;
    const r = await t.cm(["credits", "buy", pkg.id]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^Paying deposit dpst_\S+: \d+(\.\d+)? to \w+\n/);
    expect(r.stderr).toContain(`Sent ${rpc.sent[0]}; waiting for the chain`);
    expect(r.stdout).toMatch(new RegExp(`^available: +${pkg.creditsToReceive} credits\\n`));
    const history = JSON.parse((await t.cm(["credits", "history", "--json"])).stdout);
    expect(history.transactions[0]).toMatchObject({ type: "deposit", amount: pkg.creditsToReceive, txSignature: rpc.sent[0] });
    // The USDC moved on the chain: the price out of the wallet, into the treasury's (new) token account.
    const priceBaseUnits = BigInt(Math.round(Number(/: (\d+(?:\.\d+)?) to /.exec(r.stderr)![1]) * 10 ** USDC_DECIMALS));
    expect(rpc.tokenBalance(getAssociatedTokenAddressSync(USDC_MINT, wallet))).toBe(1_000_000_000n - priceBaseUnits);
    expect(rpc.tokenBalance(getAssociatedTokenAddressSync(USDC_MINT, new PublicKey(treasury), true))).toBe(priceBaseUnits);
    // The payment the control plane read back: the treasury's associated token account created idempotently, then transferChecked.
    const sent = rpc.calls.filter((c) => c.method === "getTransaction").length;
    expect(sent).toBeGreaterThan(0);
    // The payment names the deposit's reference, as a wallet paying its transfer request does, so the
    // control plane's watcher would credit it had cm died before confirming.
    const client = createClient({ baseUrl: h.url, store: new FileSessionStore(configDir({ HOME: t.home, XDG_CONFIG_HOME: join(t.home, ".config") }), h.url) });
    const deposit = (await client.credits.deposit(/^Paying deposit (dpst_\S+):/.exec(r.stderr)![1]!)).deposit;
    expect(deposit).toMatchObject({ status: "confirmed", txSignature: rpc.sent[0] });
    const named = await new Connection(rpc.url, "confirmed").getSignaturesForAddress(new PublicKey(deposit.reference!));
    expect(named.map((s) => s.signature)).toEqual([rpc.sent[0]]);
  });

  it("--json prints the API's confirm answer", async () => {
    const pkg = JSON.parse((await t.cm(["credits", "packages", "--json"])).stdout).packages[0];
    const r = await t.cm(["credits", "buy", pkg.id, "--json"]);
    expect(r.code, r.stderr).toBe(0);
    const answer = JSON.parse(r.stdout);
    expect(answer.transaction).toMatchObject({ type: "deposit", txSignature: rpc.sent.at(-1) });
    expect(answer.newBalance.available).toBe(pkg.creditsToReceive * 2);
  });

  it("says what the API refuses (an unknown package) and what the chain cannot do", async () => {
    const unknown = await t.cm(["credits", "buy", "pkg_nope"]);
    expect(unknown).toMatchObject({ code: 1, stderr: expect.stringMatching(/^error PACKAGE_NOT_FOUND: /) });
    const pkg = JSON.parse((await t.cm(["credits", "packages", "--json"])).stdout).packages[0];
    const down = await t.cm(["credits", "buy", pkg.id, "--rpc", "http://127.0.0.1:1"]);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/\nerror CHAIN_UNAVAILABLE: the Solana RPC refused or did not answer/);
    expect(down.stderr).not.toMatch(/\n\s+at /);
  });

  it("says the chain refused a payment the wallet cannot make, and why", async () => {
    const poor = terminal({ CM_API_URL: h.url, SOLANA_RPC_URL: rpc.url });
    try {
      rpc.fundTokenAccount({ owner: new PublicKey(poor.keypair().publicKey), mint: USDC_MINT, decimals: USDC_DECIMALS, amountBaseUnits: 1n });
      expect((await poor.cm(["login"])).code).toBe(0);
      const pkg = JSON.parse((await poor.cm(["credits", "packages", "--json"])).stdout).packages[0];
      const r = await poor.cm(["credits", "buy", pkg.id]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/\nerror TX_REJECTED: the Solana RPC refused the payment: .*insufficient funds/);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(JSON.parse((await poor.cm(["credits", "--json"])).stdout).balance.available).toBe(0);
    } finally {
      poor.close();
    }
  });

  it("needs an RPC: a usage error without one", async () => {
    const r = await t.cm(["credits", "buy", "pkg_x"], { SOLANA_RPC_URL: "" });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error: credits buy pays through a Solana RPC: pass --rpc URL or set SOLANA_RPC_URL/);
  });
});
