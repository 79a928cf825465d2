// A payout that waits says so in the control plane's log (issue 40, item 5): while the
// Solana RPC cannot be reached, and once it has waited an hour for its approval, with
// its id and the reason, at most once a minute, so an administrator reading the journal
// learns what an operator sees in `cm operator payouts`.
import { sqliteDatabase } from "@cm/testkit";
import { Keypair } from "@solana/web3.js";
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../../src/services/logger";
import { WAIT_LOG_EVERY_MS, WAITING_FOR_APPROVAL } from "../../src/services/payout-sender";
import { type AgentHarness, startAgentHarness } from "../agents/support/agent-harness";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../support/fake-solana-rpc";
import { operatorWithEarnings, payoutKeyFile } from "../support/payouts";

type Line = { level: string; msg: string; payoutId?: string; reason?: string; payouts?: Array<{ payoutId: string; reason: string; waitingMin: number }> };
const WARN = "warn";

describe("the payout sender's log while a payout waits", () => {
  let h: AgentHarness | undefined;
  let rpc: FakeSolanaRpc | undefined;
  afterEach(async () => {
    await h?.close();
    await rpc?.close();
  });

  /** A control plane paying from a funded hot wallet through the fake RPC, its log lines kept. */
  async function start(mode: "auto" | "manual") {
    rpc = await startFakeSolanaRpc();
    const hot = Keypair.generate();
    const mint = Keypair.generate().publicKey;
    rpc.fundTokenAccount({ owner: hot.publicKey, mint, decimals: 6, amountBaseUnits: 1_000_000_000n });
    const lines: Line[] = [];
    const log = createLogger("info", "control-plane", { write: (line: string) => void lines.push(JSON.parse(line)) });
    h = await startAgentHarness(
      sqliteDatabase,
      {
        PAYOUT_KEYPAIR: payoutKeyFile(hot),
        SOLANA_RPC_URL: rpc.url,
        STABLE_MINT: mint.toBase58(),
        EARNINGS_HOLD_HOURS: 0,
        PAYOUT_MIN_CREDITS: 10,
        PAYOUTS: mode,
      },
      { log },
    );
    const op = await operatorWithEarnings(h, 1);
    const warnings = (about: RegExp) => lines.filter((l) => l.level === WARN && about.test(l.msg));
    return { h, rpc, op, warnings };
  }

  it("names a payout waiting on an unreachable RPC, once a minute, and stops once it is paid", async () => {
    const { h, rpc, op, warnings } = await start("auto");
    await rpc.setDown(true, "refuse");
    const r = await h.call("POST", "/operator/payouts", { token: op.token, body: { amountCredits: 20 } });
    const id = r.json.payout.id as string;
    for (let i = 0; i < 5; i++) await h.deps.payoutSender!.tick();
    const rpcWaits = () => warnings(/^payout: waiting for the Solana RPC/);
    expect(rpcWaits()).toHaveLength(1);
    expect(rpcWaits()[0]).toMatchObject({ payoutId: id, reason: expect.stringMatching(/^waiting for the Solana RPC: /) });
    // What the operator reads is the same reason.
    const seen = (await h.call("GET", `/operator/payouts/${id}`, { token: op.token })).json.payout;
    expect(seen).toMatchObject({ status: "requested", error: rpcWaits()[0]!.reason });

    h.clock.advance(WAIT_LOG_EVERY_MS);
    await h.deps.payoutSender!.tick();
    await h.deps.payoutSender!.tick();
    expect(rpcWaits()).toHaveLength(2);

    await rpc.setDown(false);
    h.clock.advance(WAIT_LOG_EVERY_MS);
    for (let i = 0; i < 3; i++) await h.deps.payoutSender!.tick();
    expect((await h.call("GET", `/operator/payouts/${id}`, { token: op.token })).json.payout.status).toBe("paid");
    expect(rpcWaits()).toHaveLength(2);
  });

  it("under PAYOUTS=manual, says in one line which payouts waited over an hour for an administrator, once a minute", async () => {
    const { h, op, warnings } = await start("manual");
    const r = await h.call("POST", "/operator/payouts", { token: op.token, body: { amountCredits: 20 } });
    const id = r.json.payout.id as string;
    const approvalWaits = () => warnings(/^payouts: \d+ waiting over 60 min for an administrator's approval/);
    // Under the hour: a request an administrator has not got to yet is no news.
    h.clock.advance(59 * 60_000);
    await h.deps.payoutSender!.tick();
    expect(approvalWaits()).toHaveLength(0);

    h.clock.advance(2 * 60_000);
    await h.deps.payoutSender!.tick();
    await h.deps.payoutSender!.tick();
    expect(approvalWaits()).toHaveLength(1);
    expect(approvalWaits()[0]!.msg).toBe("payouts: 1 waiting over 60 min for an administrator's approval (cm-admin payouts list, then approve or reject)");
    expect(approvalWaits()[0]!.payouts).toEqual([{ payoutId: id, reason: WAITING_FOR_APPROVAL, waitingMin: 61 }]);

    h.clock.advance(WAIT_LOG_EVERY_MS);
    await h.deps.payoutSender!.tick();
    expect(approvalWaits()).toHaveLength(2);

    // Approved, it is sent and paid; nothing waits, nothing more is said.
    await h.deps.repos.payouts.approve(id, h.clock.now());
    h.clock.advance(WAIT_LOG_EVERY_MS);
    for (let i = 0; i < 3; i++) await h.deps.payoutSender!.tick();
    expect((await h.call("GET", `/operator/payouts/${id}`, { token: op.token })).json.payout.status).toBe("paid");
    expect(approvalWaits()).toHaveLength(2);
  });
});
