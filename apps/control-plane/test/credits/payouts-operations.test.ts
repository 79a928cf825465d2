// How an installation runs payouts: PAYOUTS=auto within its daily limit, the
// administrator's approval under PAYOUTS=manual (the real admin command), two
// control planes on one PostgreSQL database, and a hot wallet key the control
// plane refuses to start with.
import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { postgresDatabase, type TestDatabase } from "@cm/db/testing";
import { describeEachDatabase, needs } from "@cm/testkit";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Keypair, PublicKey } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testConfig } from "../../src/config";
import { createDeps, type Deps } from "../../src/deps";
import { createWeb3PayoutChain } from "../../src/services/chain/web3-payout-chain";
import { createLogger } from "../../src/services/logger";
import { loadPayoutKeypair, PayoutKeypairError } from "../../src/services/payout-keypair";
import { type AgentHarness, startAgentHarness } from "../agents/support/agent-harness";
import { freePort } from "../faults/support/pg-cluster";
import { startProgram } from "../faults/support/processes";
import { startFakeSolanaRpc } from "../support/fake-solana-rpc";
import { operatorWithEarnings, payoutKeyFile } from "../support/payouts";

const HOUR = 3_600_000;
const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, "../../../..");

/** The admin command reads the database from another process: SQLite on a file here, not in memory. */
const onFile = (db: TestDatabase): TestDatabase =>
  db.name === "sqlite"
    ? {
        name: "sqlite",
        create: async () => ({ url: `file:${path.join(mkdtempSync(path.join(os.tmpdir(), "cm-payout-ops-")), "m.db")}`, drop: async () => undefined }),
      }
    : db;

/** A fake chain with a funded hot wallet, and the configuration that pays from it. */
async function payoutChain() {
  const rpc = await startFakeSolanaRpc();
  const hot = Keypair.generate();
  const mint = Keypair.generate().publicKey;
  rpc.fundTokenAccount({ owner: hot.publicKey, mint, decimals: 6, amountBaseUnits: 1_000_000_000n });
  const config = { PAYOUT_KEYPAIR: payoutKeyFile(hot), SOLANA_RPC_URL: rpc.url, STABLE_MINT: mint.toBase58(), EARNINGS_HOLD_HOURS: 0, PAYOUT_MIN_CREDITS: 10 };
  const landedTo = (wallet: string) => {
    const ata = getAssociatedTokenAddressSync(mint, new PublicKey(wallet), true).toBase58();
    return rpc.landedTransfers().filter((t) => t.destination === ata);
  };
  return { rpc, hot, mint, config, landedTo };
}

describeEachDatabase("PAYOUTS=auto on $name", (db) => {
  let h: AgentHarness;
  let chain: Awaited<ReturnType<typeof payoutChain>>;

  beforeAll(async () => {
    chain = await payoutChain();
    h = await startAgentHarness(db, { ...chain.config, PAYOUTS: "auto", PAYOUT_DAILY_LIMIT_CREDITS: 50 });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await chain?.rpc.close();
  });
  const payout = async (token: string, id: string) => (await h.call("GET", `/operator/payouts/${id}`, { token })).json.payout;

  it("PAYOUTS=auto sends a request at once, and one past the day's limit waits, saying so, until there is room", async () => {
    const op = await operatorWithEarnings(h, 1);
    const first = await h.call("POST", "/operator/payouts", { token: op.token, body: { amountCredits: 30 } });
    expect(first.status).toBe(201);
    // The request itself started a turn of the sender: approved and sent with no administrator.
    await h.deps.payoutSender!.tick();
    expect(await payout(op.token, first.json.payout.id)).toMatchObject({ status: "paid", approvedAt: expect.any(String) });

    // More than a whole day's limit could never be sent: refused at once rather than queued for ever.
    const tooBig = await h.call("POST", "/operator/payouts", { token: op.token, body: { amountCredits: 51 } });
    expect(tooBig.status).toBe(422);
    expect(tooBig.json.error).toMatchObject({ code: "PAYOUT_ABOVE_DAILY_LIMIT", details: { dailyLimitCredits: 50 } });
    const second = await h.call("POST", "/operator/payouts", { token: op.token, body: { amountCredits: 30 } });
    await h.deps.payoutSender!.tick();
    expect(await payout(op.token, second.json.payout.id)).toMatchObject({ status: "requested", error: expect.stringContaining("daily payout limit") });
    expect((await h.call("GET", "/operator/earnings", { token: op.token })).json.earnings).toMatchObject({ available: 30, payingOut: 30, paidOut: 30 });

    h.clock.advance(24 * HOUR + 1);
    await h.deps.payoutSender!.tick();
    await h.deps.payoutSender!.tick();
    const paid = await payout(op.token, second.json.payout.id);
    expect(paid).toMatchObject({ status: "paid" });
    expect(paid.error).toBeUndefined();
    expect(chain.landedTo(op.wallet.address).map((t) => t.amountBaseUnits)).toEqual([300_000n, 300_000n]);
  });
});

describeEachDatabase("PAYOUTS=manual with the admin command on $name", (db) => {
  let h: AgentHarness;
  let chain: Awaited<ReturnType<typeof payoutChain>>;
  let url = "";

  beforeAll(async () => {
    chain = await payoutChain();
    const d = onFile(db);
    h = await startAgentHarness(
      {
        name: d.name,
        create: async () => {
          const made = await d.create();
          url = made.url;
          return made;
        },
      },
      { ...chain.config, PAYOUTS: "manual" },
    );
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await chain?.rpc.close();
  });
  const payout = async (token: string, id: string) => (await h.call("GET", `/operator/payouts/${id}`, { token })).json.payout;

  it("PAYOUTS=manual: npm run admin -- payouts lists what waits and approves it; the control plane then pays it", async () => {
    const op = await operatorWithEarnings(h, 1);
    const r = await h.call("POST", "/operator/payouts", { token: op.token, body: { amountCredits: 20 } });
    const id = r.json.payout.id as string;
    // Turns of the sender before any approval send nothing.
    await h.deps.payoutSender!.tick();
    expect(await payout(op.token, id)).toMatchObject({ status: "requested", error: expect.stringContaining("administrator") });
    const admin = (...args: string[]) =>
      run(path.join(root, "node_modules", ".bin", "tsx"), [path.join(root, "apps/control-plane/src/admin.ts"), "payouts", ...args], {
        env: { ...process.env, DATABASE_URL: url },
      });
    const listed = await admin("list");
    expect(listed.stdout).toContain(id);
    expect(listed.stdout).toContain("20 credits");
    await expect(admin("approve", "pay_nosuch")).rejects.toMatchObject({ stderr: expect.stringContaining("no payout pay_nosuch") });
    const approved = await admin("approve", id);
    expect(approved.stdout).toContain(`approved ${id}`);
    await expect(admin("approve", id)).rejects.toMatchObject({ stderr: expect.stringContaining("approved already") });
    await h.deps.payoutSender!.tick();
    await h.deps.payoutSender!.tick();
    expect(await payout(op.token, id)).toMatchObject({ status: "paid" });
    expect((await admin("list")).stdout).not.toContain(id);

    // Turned down before it is sent: failed with the reason, its credits available again.
    const before = (await h.call("GET", "/operator/earnings", { token: op.token })).json.earnings.available;
    const other = await h.call("POST", "/operator/payouts", { token: op.token, body: { amountCredits: 10 } });
    const rejected = await admin("reject", other.json.payout.id, "wallet", "under", "review");
    expect(rejected.stdout).toContain(`rejected ${other.json.payout.id}`);
    expect(await payout(op.token, other.json.payout.id)).toMatchObject({ status: "failed", error: "rejected by an administrator: wallet under review" });
    expect((await h.call("GET", "/operator/earnings", { token: op.token })).json.earnings.available).toBe(before);
    await expect(admin("reject", id, "too", "late")).rejects.toMatchObject({ stderr: expect.stringContaining("only a requested payout can be rejected") });
  }, 180_000);
});

needs("postgres").describe("two control planes on one PostgreSQL database", () => {
  let h: AgentHarness;
  let other: Deps;
  let chain: Awaited<ReturnType<typeof payoutChain>>;

  beforeAll(async () => {
    chain = await payoutChain();
    let url = "";
    h = await startAgentHarness(
      {
        name: "postgres",
        create: async () => {
          const made = await postgresDatabase.create();
          url = made.url;
          return made;
        },
      },
      { ...chain.config, PAYOUT_LEASE_S: 1 },
    );
    // A second replica: its own process state (its sender and its leases' name), the same database and clock.
    other = await createDeps(testConfig({ ...chain.config, PAYOUT_LEASE_S: 1, DATABASE_URL: url, LOG_LEVEL: "silent" }), {
      clock: h.clock,
      log: createLogger("silent"),
      manualTicks: true,
      payoutChain: createWeb3PayoutChain({ rpcUrl: chain.rpc.url, commitment: "confirmed" }),
    });
  }, 60_000);
  afterAll(async () => {
    await other?.close();
    await h?.close();
    await chain?.rpc.close();
  });

  it("never send one payout twice, turning at the same moments, with leases running out between turns", async () => {
    const ops = [];
    for (let i = 0; i < 6; i++) ops.push(await operatorWithEarnings(h, 1));
    const ids: string[] = [];
    for (const op of ops) {
      const r = await h.call("POST", "/operator/payouts", { token: op.token, body: { amountCredits: 25 } });
      expect(r.status).toBe(201);
      ids.push(r.json.payout.id);
    }
    await h.deps.repos.payouts.approve(undefined, h.clock.now());
    // Blockhashes expire between some turns too, so both replicas get to decide on new transfers.
    for (let turn = 0; turn < 12; turn++) {
      await Promise.all([h.deps.payoutSender!.tick(), other.payoutSender!.tick()]);
      h.clock.advance(1_500);
      if (turn % 3 === 1) chain.rpc.advanceBlocks(200);
    }
    for (const [i, op] of ops.entries()) {
      const p = await h.deps.repos.payouts.get(ids[i]!);
      expect(p).toMatchObject({ status: "paid" });
      expect(chain.landedTo(op.wallet.address).map((t) => [t.signature, t.amountBaseUnits])).toEqual([[p!.signature, 250_000n]]);
    }
  }, 60_000);
});

describe("the payout wallet's keypair file", () => {
  it("is refused unless only its owner may read it, naming the file and the fix and never the key", () => {
    const key = Keypair.generate();
    const open = payoutKeyFile(key, 0o644);
    expect(() => loadPayoutKeypair(open)).toThrow(PayoutKeypairError);
    expect(() => loadPayoutKeypair(open)).toThrow(`chmod 600 ${open}`);
    expect(loadPayoutKeypair(payoutKeyFile(key)).publicKey.toBase58()).toBe(key.publicKey.toBase58());
    expect(() => loadPayoutKeypair("/nonexistent/hot.json")).toThrow("cannot read /nonexistent/hot.json (ENOENT)");
  });

  it("stops the control plane at start with the configuration exit code, its key never printed", async () => {
    const key = Keypair.generate();
    const file = payoutKeyFile(key, 0o640);
    const p = startProgram("control-plane", "apps/control-plane/src/index.ts", [], {
      PORT: String(await freePort()),
      DATABASE_URL: "file::memory:",
      PAYOUT_KEYPAIR: file,
    });
    expect(await p.exited).toBe(78);
    const out = p.lines.join("\n");
    expect(out).toContain(`PAYOUT_KEYPAIR: ${file} has mode 0640`);
    expect(out).not.toContain(JSON.stringify(Array.from(key.secretKey)).slice(1, 40));
    // Nor a warning no user can act on (npm start printed bigint-buffer's on every start: issue 39).
    expect(out).not.toMatch(/Failed to load bindings/);
  }, 60_000);
});
