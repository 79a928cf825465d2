import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sqliteDatabase } from "@cm/testkit";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Keypair, PublicKey } from "@solana/web3.js";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type AgentHarness, eventually, startAgentHarness } from "../../control-plane/test/agents/support/agent-harness";
import type { SimAgent } from "../../control-plane/test/agents/support/sim-agent";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../../control-plane/test/support/fake-solana-rpc";
import { type CliResult, terminal } from "./support/cli";
import { enrolNodeFromCli } from "./support/operator-node";

// `cm operator payout` and `cm operator payouts` against a real control plane that pays
// from a hot wallet (PAYOUT_KEYPAIR, PAYOUTS=auto) through the tests' Solana RPC, which
// executes the signed transfers. The operator enrols a node from the CLI and a simulated
// agent runs a tenant's deployment on it for ten metered minutes at 600 cents an hour:
// 100 credits of usage, 90 earned, available at once (EARNINGS_HOLD_HOURS=0).
let h: AgentHarness;
let rpc: FakeSolanaRpc;
let op: ReturnType<typeof terminal>;
let agent: SimAgent;
let keyDir: string;
let operatorWallet: PublicKey;
const hotWallet = Keypair.generate();
const mint = Keypair.generate().publicKey;
const MIN_CREDITS = 5;
/** Room for the payouts before the last test (40 credits paid; a failed one holds none), not for that one's 25 more. */
const DAILY_LIMIT_CREDITS = 60;
const operatorTokens = () => rpc.tokenBalance(getAssociatedTokenAddressSync(mint, operatorWallet));

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
    PAYOUT_DAILY_LIMIT_CREDITS: DAILY_LIMIT_CREDITS,
    EARNINGS_HOLD_HOURS: 0,
    SOLANA_RPC_URL: rpc.url,
    STABLE_MINT: mint.toBase58(),
  });
  op = terminal({ CM_API_URL: h.url });
  operatorWallet = new PublicKey(op.keypair().publicKey);
  const { nodeId, agent: connected } = await enrolNodeFromCli(h, op, { name: "earner", rate: 600, max: 2 });
  agent = connected;
  const t = await h.signIn();
  await h.grantCredits(t.user.id, 1_000);
  const d = await h.deploy(t.token, nodeId, agent);
  await h.run(agent, d.spec, t.token);
  await h.meterMinutes(agent, nodeId, 10);
}, 60_000);
afterAll(async () => {
  await agent?.close();
  op?.close();
  await h?.close();
  await rpc?.close();
  if (keyDir) rmSync(keyDir, { recursive: true, force: true });
});

/** Runs cm while the payout sender takes its turns (the harness runs no timers), as a control plane would every 2 s. */
async function cmWhileSending(args: string[], eachTurn: () => void = () => {}): Promise<CliResult> {
  let exited = false;
  const run = op.cm(args).finally(() => {
    exited = true;
  });
  while (!exited) {
    await h.deps.payoutSender!.tick();
    eachTurn();
    await new Promise((r) => setTimeout(r, 50));
  }
  return run;
}

const field = (stdout: string, name: string) => new RegExp(`^${name}:\\s+(.*)$`, "m").exec(stdout)?.[1];

it("pays with --wait: status changes on stderr, then the paid payout with its signature, and the USDC in the operator's wallet", async () => {
  const r = await cmWhileSending(["operator", "payout", "30", "--wait"]);
  expect(r.code, r.stderr).toBe(0);
  expect(r.stderr).toMatch(new RegExp(`^Requested pay_\\S+: 30 credits \\(0\\.3 USDC\\) to ${operatorWallet.toBase58()}\\.$`, "m"));
  expect(r.stderr).toMatch(/^ {2}\d\d:\d\d:\d\d {2}paid$/m);
  expect(field(r.stdout, "status")).toBe("paid");
  expect(field(r.stdout, "amount")).toBe("30 credits (0.3 USDC)");
  expect(field(r.stdout, "wallet")).toBe(operatorWallet.toBase58());
  const signature = field(r.stdout, "signature")!;
  expect(rpc.sent).toContain(signature);
  // 0.30 USDC, in base units, in the operator's own token account.
  expect(operatorTokens()).toBe(300_000n);

  const earnings = await op.cm(["operator", "earnings"]);
  expect(earnings.stdout).toMatch(/^available:\s+60 credits/m);
  expect(earnings.stdout).toMatch(/^paying out:\s+0 credits/m);
  expect(earnings.stdout).toMatch(/^paid out:\s+30 credits/m);

  const list = await op.cm(["operator", "payouts"]);
  expect(list.code, list.stderr).toBe(0);
  const id = field(r.stdout, "id")!;
  const requestedAt = field(r.stdout, "requested")!;
  expect(list.stdout.trim().split("\n")).toEqual([`${id}\tpaid\t30\t0.3\t${requestedAt}\t${signature.slice(0, 8)}...${signature.slice(-8)}`]);
  expect(list.stderr).toContain("page 1 of 1 (1 payouts)");
  const json = JSON.parse((await op.cm(["operator", "payouts", "--json"])).stdout);
  expect(json.payouts).toEqual([expect.objectContaining({ id, status: "paid", amountCredits: 30, txSignature: signature })]);
});

it("requests without --wait: the payout as requested, counted as paying out until the sender has paid it", async () => {
  // Later than the first payout, so it is the newest (payouts requested in one millisecond list by id).
  h.clock.advance(1_000);
  const r = await op.cm(["operator", "payout", "10"]);
  expect(r.code, r.stderr).toBe(0);
  // Under PAYOUTS=auto its first transfer may already be signed when the answer is written.
  expect(field(r.stdout, "status")).toMatch(/^(requested|sending)$/);
  expect(field(r.stdout, "amount")).toBe("10 credits (0.1 USDC)");
  expect(r.stderr).toContain("cm operator payouts");
  // The transfer lands on the sender's next turn; none has run since.
  const during = await op.cm(["operator", "earnings"]);
  expect(during.stdout).toMatch(/^available:\s+50 credits/m);
  expect(during.stdout).toMatch(/^paying out:\s+10 credits/m);

  const json = await op.cm(["operator", "payouts", "--json", "--limit", "1"]);
  const [latest] = JSON.parse(json.stdout).payouts;
  expect(latest).toMatchObject({ id: field(r.stdout, "id"), amountCredits: 10 });
  await eventually(async () => {
    await h.deps.payoutSender!.tick();
    expect((await h.deps.repos.payouts.get(latest.id))?.status).toBe("paid");
  });
  expect(operatorTokens()).toBe(400_000n);
  expect((await op.cm(["operator", "earnings"])).stdout).toMatch(/^paid out:\s+40 credits/m);
});

it("refuses below PAYOUT_MIN_CREDITS, above what is available and above a day's limit with the API's code and message, and a CREDITS that is not a whole number", async () => {
  const below = await op.cm(["operator", "payout", String(MIN_CREDITS - 1)]);
  expect(below.code).toBe(1);
  expect(below.stderr).toContain(`error PAYOUT_BELOW_MINIMUM: a payout is at least ${MIN_CREDITS} credits`);
  const over = await op.cm(["operator", "payout", "55"]);
  expect(over.code).toBe(1);
  expect(over.stderr).toContain("error INSUFFICIENT_EARNINGS: you asked for 55 credits and 50 are available to pay out");
  const aboveLimit = await op.cm(["operator", "payout", "1000"]);
  expect(aboveLimit.code).toBe(1);
  expect(aboveLimit.stderr).toContain(`error PAYOUT_ABOVE_DAILY_LIMIT: this installation pays out at most ${DAILY_LIMIT_CREDITS} credits a day`);
  const fraction = await op.cm(["operator", "payout", "12.5"]);
  expect(fraction.code).toBe(2);
  expect(fraction.stderr).toContain("CREDITS is a whole number of credits");
  expect((await op.cm(["operator", "payouts", "--json"])).stdout).toContain('"total": 2');
});

it("exits 1 with --wait when the payout fails (no transfer ever lands), and its credits are available again", async () => {
  const before = operatorTokens();
  // Every transfer is taken and never included: each expires unseen, until the sender gives up.
  rpc.fail("sendTransaction", { kind: "dropped" });
  let r: CliResult;
  try {
    r = await cmWhileSending(["operator", "payout", String(MIN_CREDITS), "--wait", "--json"], () => rpc.advanceBlocks(200));
  } finally {
    rpc.heal("sendTransaction");
  }
  expect(r.code, r.stderr).toBe(1);
  const { payout } = JSON.parse(r.stdout);
  expect(payout).toMatchObject({ status: "failed", amountCredits: MIN_CREDITS, error: expect.stringContaining("none landed") });
  expect(r.stderr).toMatch(/^Payout failed: .*none landed.*\. Nothing was paid; its 5 credits are available again\.$/m);
  expect(operatorTokens()).toBe(before);
  const earnings = await op.cm(["operator", "earnings"]);
  expect(earnings.stdout).toMatch(/^available:\s+50 credits/m);
  expect(earnings.stdout).toMatch(/^paying out:\s+0 credits/m);
});

it("says what a payout waits for: past the daily limit, --wait --timeout gives up with WAIT_TIMEOUT naming it, and the payout goes on", async () => {
  h.clock.advance(1_000);
  const r = await op.cm(["operator", "payout", "25", "--wait", "--timeout", "1"]);
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(/^ {2}\d\d:\d\d:\d\d {2}requested/m);
  expect(r.stderr).toMatch(
    /error WAIT_TIMEOUT: payout pay_\S+ was neither paid nor failed in 1000 ms: it is requested \(waiting for room under this installation's daily payout limit/,
  );
  const list = await op.cm(["operator", "payouts", "--json", "--limit", "1"]);
  const [waiting] = JSON.parse(list.stdout).payouts;
  expect(waiting).toMatchObject({ status: "requested", amountCredits: 25, error: expect.stringContaining("PAYOUT_DAILY_LIMIT_CREDITS") });
  const shown = await op.cm(["operator", "payouts"]);
  expect(shown.stdout.split("\n")[0]).toBe(`${waiting.id}\trequested\t25\t0.25\t${waiting.requestedAt}\t-`);
  // What it waits for, under the table (not only in --json), and why the earlier one failed.
  expect(shown.stderr).toContain(`${waiting.id} requested: waiting for room under this installation's daily payout limit (PAYOUT_DAILY_LIMIT_CREDITS`);
  expect(shown.stderr).toMatch(/^pay_\S+ failed: .*none landed/m);

  // A day later the first payouts leave the window: it is sent, and paid.
  const before = operatorTokens()!;
  h.clock.advance(24 * 3_600_000);
  await eventually(async () => {
    await h.deps.payoutSender!.tick();
    expect((await h.deps.repos.payouts.get(waiting.id))?.status).toBe("paid");
  });
  expect(operatorTokens()).toBe(before + 250_000n);
});
