import { sqliteDatabase } from "@cm/testkit";
import { Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness, TestClock } from "../../control-plane/test/support/harness";
import { USDC_MINT } from "../../control-plane/test/support/solana-fixtures";
import { terminal } from "./support/cli";
import { startPayingRpc } from "./support/paying-rpc";

// `cm credits buy`: a real USDC transferChecked signed with the keypair, sent to the
// tests' Solana RPC, confirmed there, then confirmed by the control plane reading it back.

let h: Harness;
let rpc: Awaited<ReturnType<typeof startPayingRpc>>;
let t: ReturnType<typeof terminal>;
const treasury = Keypair.generate().publicKey.toBase58();
beforeAll(async () => {
  rpc = await startPayingRpc();
  h = await startHarness(sqliteDatabase, {
    overrides: { clock: new TestClock(Date.now()) },
    config: { TREASURY_WALLET: treasury, SOLANA_RPC_URL: rpc.url, STABLE_MINT: USDC_MINT.toBase58() },
  });
  t = terminal({ CM_API_URL: h.url, SOLANA_RPC_URL: rpc.url });
  t.keypair();
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
    // The payment the control plane read back: the treasury's associated token account created idempotently, then transferChecked.
    const sent = rpc.calls.filter((c) => c.method === "getTransaction").length;
    expect(sent).toBeGreaterThan(0);
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

  it("needs an RPC: a usage error without one", async () => {
    const r = await t.cm(["credits", "buy", "pkg_x"], { SOLANA_RPC_URL: "" });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error: credits buy pays through a Solana RPC: pass --rpc URL or set SOLANA_RPC_URL/);
  });
});
