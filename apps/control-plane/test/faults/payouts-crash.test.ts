// A control plane SIGKILLed in the middle of a payout, then started again: the
// payout is paid, once. Killed after the transfer was recorded and before the
// chain got it; after the chain took it and before the answer came; and killed,
// then left down until the recorded transfer's blockhash expired. The control
// plane is a process of its own (as an operator runs it) on a database the test
// seeded through the real API and meter.
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { PayoutRow } from "@cm/db";
import type { TestDatabase } from "@cm/db/testing";
import { describeEachDatabase } from "@cm/testkit";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Keypair, PublicKey } from "@solana/web3.js";
import { afterAll, beforeAll, beforeEach, expect, it } from "vitest";
import { type AgentHarness, startAgentHarness } from "../agents/support/agent-harness";
import { checkWholeBooks } from "../support/books";
import { type FakeFault, type FakeSolanaRpc, startFakeSolanaRpc } from "../support/fake-solana-rpc";
import { operatorWithEarnings, payoutKeyFile } from "../support/payouts";
import { until } from "../support/until";
import { freePort } from "./support/pg-cluster";
import { type Program, startProgram } from "./support/processes";

/** Two processes share the database: SQLite on a file, not in memory. */
const onFile = (db: TestDatabase): TestDatabase =>
  db.name === "sqlite"
    ? {
        name: "sqlite",
        create: async () => ({ url: `file:${path.join(mkdtempSync(path.join(os.tmpdir(), "cm-payout-crash-")), "m.db")}`, drop: async () => undefined }),
      }
    : db;

describeEachDatabase("payouts across a SIGKILL on $name", (db) => {
  let h: AgentHarness;
  let rpc: FakeSolanaRpc;
  let url = "";
  let keyFile = "";
  let cp: Program | undefined;
  const hot = Keypair.generate();
  const mint = Keypair.generate().publicKey;

  beforeAll(async () => {
    rpc = await startFakeSolanaRpc();
    rpc.fundTokenAccount({ owner: hot.publicKey, mint, decimals: 6, amountBaseUnits: 1_000_000_000n });
    keyFile = payoutKeyFile(hot);
    const d = onFile(db);
    // Earnings are made through this in-process control plane; its sender never runs (no timer, no tick).
    h = await startAgentHarness(
      {
        name: d.name,
        create: async () => {
          const made = await d.create();
          url = made.url;
          return made;
        },
      },
      { PAYOUT_KEYPAIR: keyFile, SOLANA_RPC_URL: rpc.url, STABLE_MINT: mint.toBase58(), EARNINGS_HOLD_HOURS: 0, PAYOUT_MIN_CREDITS: 10 },
    );
  }, 60_000);
  afterAll(async () => {
    await cp?.stop();
    await h?.close();
    await rpc?.close();
  });
  beforeEach(() => rpc.heal());

  async function startControlPlane(): Promise<Program> {
    const p = startProgram("control-plane", "apps/control-plane/src/index.ts", [], {
      PORT: String(await freePort()),
      HOST: "127.0.0.1",
      DATABASE_URL: url,
      LOG_LEVEL: "info",
      SOLANA_RPC_URL: rpc.url,
      SOLANA_COMMITMENT: "confirmed",
      STABLE_MINT: mint.toBase58(),
      PAYOUT_KEYPAIR: keyFile,
      PAYOUT_SEND_INTERVAL_MS: "200",
      PAYOUT_LEASE_S: "1",
      EARNINGS_HOLD_HOURS: "0",
      DEPOSIT_WATCH_INTERVAL_MS: "0",
    });
    await p.waitForLine(/control plane listening/, 60_000);
    return p;
  }

  /** An approved payout of 20 credits to a fresh operator. */
  async function approvedPayout() {
    const op = await operatorWithEarnings(h, 1);
    const r = await h.call("POST", "/operator/payouts", { token: op.token, body: { amountCredits: 20 } });
    expect(r.status).toBe(201);
    const id = r.json.payout.id as string;
    await h.deps.repos.payouts.approve(id, h.clock.now());
    return { op, id };
  }
  const row = async (id: string) => (await h.deps.repos.payouts.get(id)) as PayoutRow;
  const landedTo = (wallet: string) => {
    const ata = getAssociatedTokenAddressSync(mint, new PublicKey(wallet), true).toBase58();
    return rpc.landedTransfers().filter((t) => t.destination === ata);
  };

  /** Starts a control plane, lets it reach sendTransaction under `fault`, and SIGKILLs it there. */
  async function killAtSend(fault: FakeFault, id: string): Promise<PayoutRow> {
    rpc.fail("sendTransaction", fault);
    const sends = rpc.calls.filter((c) => c.method === "sendTransaction").length;
    cp = await startControlPlane();
    await until("the control plane sends the payout", async () => rpc.calls.filter((c) => c.method === "sendTransaction").length > sends, 30_000);
    cp.signal("SIGKILL");
    await cp.exited;
    cp = undefined;
    rpc.heal();
    // Recorded before it was sent: the row names the transfer the chain may or may not have.
    const recorded = await row(id);
    expect(recorded).toMatchObject({ status: "sending", attempt: 1 });
    expect(recorded.signature).toBeTruthy();
    return recorded;
  }

  async function restartUntilPaid(id: string): Promise<PayoutRow> {
    cp = await startControlPlane();
    await until(
      "the restarted control plane pays it",
      async () => (await row(id)).status === "paid",
      30_000,
      async () => cp?.tail() ?? "",
    );
    await cp.stop();
    cp = undefined;
    return row(id);
  }

  it("killed after recording the transfer, before the chain got it: the same transfer is sent after the restart", async () => {
    const { op, id } = await approvedPayout();
    const recorded = await killAtSend({ kind: "no-answer" }, id);
    expect(landedTo(op.wallet.address)).toEqual([]);
    const paid = await restartUntilPaid(id);
    expect(paid.signature).toBe(recorded.signature);
    expect(landedTo(op.wallet.address).map((t) => [t.signature, t.amountBaseUnits])).toEqual([[recorded.signature, 200_000n]]);
    await checkWholeBooks(h.deps.repos);
  }, 120_000);

  it("killed after the chain took the transfer, before its answer: the restart finds it landed and sends nothing new", async () => {
    const { op, id } = await approvedPayout();
    const recorded = await killAtSend({ kind: "lost-answer" }, id);
    expect(landedTo(op.wallet.address).map((t) => t.signature)).toEqual([recorded.signature]);
    const sendsBefore = rpc.calls.filter((c) => c.method === "sendTransaction").length;
    const paid = await restartUntilPaid(id);
    expect(paid.signature).toBe(recorded.signature);
    expect(rpc.calls.filter((c) => c.method === "sendTransaction").length).toBe(sendsBefore);
    expect(landedTo(op.wallet.address).map((t) => t.signature)).toEqual([recorded.signature]);
    await checkWholeBooks(h.deps.repos);
  }, 120_000);

  it("killed before the chain got it and down until its blockhash expired: one new transfer, the old one never lands", async () => {
    const { op, id } = await approvedPayout();
    const recorded = await killAtSend({ kind: "no-answer" }, id);
    rpc.advanceBlocks(200);
    const paid = await restartUntilPaid(id);
    expect(paid.signature).not.toBe(recorded.signature);
    expect(paid).toMatchObject({ attempt: 2, earlierSignatures: recorded.signature });
    expect(landedTo(op.wallet.address).map((t) => t.signature)).toEqual([paid.signature]);
    await checkWholeBooks(h.deps.repos);
  }, 120_000);
});
