import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type { TestDatabase } from "@cm/db/testing";
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { costMicro, feeMicro } from "../../src/services/charges";
import { type AgentHarness, eventually, startAgentHarness } from "../agents/support/agent-harness";
import type { SimAgent } from "../agents/support/sim-agent";

const S = 1000;
const HOUR = 3600 * S;
const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, "../../../..");

/** The admin command reads the database from another process: SQLite on a file here, not in memory. */
const shared = (db: TestDatabase): TestDatabase =>
  db.name === "sqlite"
    ? {
        name: "sqlite",
        create: async () => ({ url: `file:${path.join(mkdtempSync(path.join(os.tmpdir(), "cm-earn-")), "m.db")}`, drop: async () => undefined }),
      }
    : db;

describeEachDatabase("operators' earnings on $name", (db) => {
  let h: AgentHarness;
  let url: string;
  const tenants = new Set<string>();
  const operators = new Set<string>();

  beforeAll(async () => {
    const d = shared(db);
    // The harness makes its own database from `d`; the admin command is pointed at the same URL.
    h = await startAgentHarness({
      name: d.name,
      create: async () => {
        const made = await d.create();
        url = made.url;
        return made;
      },
    });
  });
  afterAll(() => h.close());

  async function tenantWith(credits: number) {
    const t = await h.signIn();
    await h.grantCredits(t.user.id, credits);
    tenants.add(t.user.id);
    return t;
  }
  async function operator() {
    const o = await h.signIn();
    operators.add(o.user.id);
    return o;
  }
  /** Runs a deployment for `ms` of metered time (ticks every minute, and a last one for the remainder). */
  async function runFor(agent: SimAgent, nodeId: string, ms: number) {
    for (let left = ms; left > 0; left -= 60 * S) {
      h.clock.advance(Math.min(left, 60 * S));
      await h.beat(agent, nodeId);
      await h.deps.metering.tick();
    }
  }
  const earnings = async (token: string, query = "") => {
    const r = await h.call("GET", `/operator/earnings${query}`, { token });
    expect(r.status).toBe(200);
    return r.json.earnings;
  };
  const micro = (credits: number) => Math.round(credits * 1_000_000);

  /**
   * After every scenario: each tenant's balance is the sum of their rows; usage less
   * refunds is what operators earned plus the platform's fees, net of what refunds
   * took back; and each operator's earnings are their pending plus available (nothing is paid yet).
   */
  async function checkMoney() {
    for (const id of tenants) await h.checkBooks(id);
    const books = await h.deps.repos.earnings.books();
    expect(books.usageMicro - books.refundsMicro).toBe(books.operatorMicro + books.platformMicro);
    let split = 0;
    for (const id of operators) {
      const s = await h.deps.repos.earnings.summary(id, h.clock.now(), 24 * HOUR, 1);
      expect(s.pendingMicro).toBeGreaterThanOrEqual(0);
      expect(s.availableMicro).toBeGreaterThanOrEqual(0);
      split += s.pendingMicro + s.availableMicro;
    }
    expect(split).toBe(books.operatorMicro);
    return books;
  }

  it("credits the node's operator with each charge less the fee, pending for the hold, then available, per node and per day", async () => {
    const op = await operator();
    const t = await tenantWith(1000);
    const a = await h.connectedNode(op.token, { hourlyRateCents: 50 });
    const b = await h.connectedNode(op.token, { hourlyRateCents: 7 });
    const da = await h.deploy(t.token, a.id, a.agent);
    const db = await h.deploy(t.token, b.id, b.agent);
    await h.run(a.agent, da.spec, t.token);
    await h.run(b.agent, db.spec, t.token);
    h.clock.advance(90_500);
    await h.beat(a.agent, a.id);
    await h.beat(b.agent, b.id);
    await h.deps.metering.tick();
    h.clock.advance(37 * S);
    await h.beat(a.agent, a.id);
    await h.beat(b.agent, b.id);
    await h.deps.metering.tick();

    // Every usage row has the operator's row and the fee's row pointing at it, adding up to it exactly.
    const usage = (await h.deps.repos.ledger.list(t.user.id, "usage", 1, 100)).rows;
    expect(usage).toHaveLength(4);
    const rows = (await h.deps.repos.earnings.list(op.user.id, 1, 100)).rows;
    expect(rows).toHaveLength(4);
    for (const u of usage) {
      const mine = rows.find((r) => r.creditTransactionId === u.id)!;
      expect(mine).toMatchObject({
        type: "usage",
        account: "operator",
        deploymentId: u.deploymentId,
        amountMicro: -u.amountMicro - feeMicro(-u.amountMicro, 10),
      });
    }
    const costA = costMicro(50, 127_500);
    const costB = costMicro(7, 127_500);
    const earnedA = costA - feeMicro(costMicro(50, 90_500), 10) - feeMicro(costA - costMicro(50, 90_500), 10);
    const earnedB = costB - feeMicro(costMicro(7, 90_500), 10) - feeMicro(costB - costMicro(7, 90_500), 10);

    const e = await earnings(op.token);
    expect(e).toMatchObject({ pending: (earnedA + earnedB) / 1e6, available: 0, paidOut: 0, holdHours: 24, feePercent: 10 });
    expect(e.byNode).toEqual(
      expect.arrayContaining([
        { nodeId: a.id, usage: costA / 1e6, fee: (costA - earnedA) / 1e6, refunded: 0, earned: earnedA / 1e6 },
        { nodeId: b.id, usage: costB / 1e6, fee: (costB - earnedB) / 1e6, refunded: 0, earned: earnedB / 1e6 },
      ]),
    );
    expect(e.byDay).toEqual([
      {
        date: new Date(h.clock.now()).toISOString().slice(0, 10),
        usage: (costA + costB) / 1e6,
        fee: (costA + costB - earnedA - earnedB) / 1e6,
        refunded: 0,
        earned: (earnedA + earnedB) / 1e6,
      },
    ]);
    // The tenant operates nothing: zeros, not an error.
    expect(await earnings(t.token)).toMatchObject({ pending: 0, available: 0, paidOut: 0, byNode: [], byDay: [] });
    await checkMoney();

    // Stopped, and the hold passes: all of it is available.
    await h.call("POST", `/deployments/${da.id}/stop`, { token: t.token });
    await h.call("POST", `/deployments/${db.id}/stop`, { token: t.token });
    h.clock.advance(24 * HOUR + S);
    const later = await earnings(op.token, "?days=2");
    expect(later).toMatchObject({ pending: 0, available: (earnedA + earnedB) / 1e6 });
    expect(later.byDay.length).toBeGreaterThanOrEqual(1);
    expect((await earnings(op.token, "?days=1")).byDay.length).toBeLessThanOrEqual(1);
    await checkMoney();
    for (const n of [a, b]) await n.agent.close();
  });

  it("splits odd charges at another fee to the micro-credit: the fee rounded down, the operator the rest", async () => {
    const other = await startAgentHarness(db, { PLATFORM_FEE_PERCENT: 33 });
    try {
      const o = await other.signIn();
      const t = await other.signIn();
      await other.grantCredits(t.user.id, 100);
      const n = await other.connectedNode(o.token, { hourlyRateCents: 7 });
      const d = await other.deploy(t.token, n.id, n.agent);
      await other.run(n.agent, d.spec, t.token);
      for (const step of [1, 3, 7, 11, 13, 17, 19]) {
        other.clock.advance(step * S + 1);
        n.agent.heartbeat();
        await eventually(() => expect(other.deps.agents.lastSeenMs(n.id)).toBe(other.clock.now()));
        await other.deps.metering.tick();
      }
      const usage = (await other.deps.repos.ledger.list(t.user.id, "usage", 1, 100)).rows;
      expect(usage).toHaveLength(7);
      const all = await other.deps.repos.handle.run((q) => q.select().from(other.deps.repos.handle.t.operatorEarnings));
      for (const u of usage) {
        const charge = -u.amountMicro;
        const mine = all.filter((r) => r.creditTransactionId === u.id);
        expect(mine.find((r) => r.account === "platform")?.amountMicro).toBe(Math.floor((charge * 33) / 100));
        expect(mine.reduce((sum, r) => sum + r.amountMicro, 0)).toBe(charge);
      }
      expect((await other.call("GET", "/operator/earnings", { token: o.token })).json.earnings.feePercent).toBe(33);
      await other.checkBooks(t.user.id);
      await n.agent.close();
    } finally {
      await other.close();
    }
  });

  it("lists the operator's rows newest first, paginated like the credit transactions", async () => {
    const op = await operator();
    const t = await tenantWith(100);
    const n = await h.connectedNode(op.token, { hourlyRateCents: 60 });
    const d = await h.deploy(t.token, n.id, n.agent);
    await h.run(n.agent, d.spec, t.token);
    await runFor(n.agent, n.id, 5 * 60 * S);
    const first = await h.call("GET", "/operator/earnings/transactions?limit=2", { token: op.token });
    expect(first.status).toBe(200);
    expect(first.json.pagination).toEqual({ page: 1, limit: 2, total: 5, totalPages: 3 });
    const [newest] = first.json.transactions;
    expect(newest).toMatchObject({ type: "usage", amount: 0.9, nodeId: n.id, deploymentId: d.id, createdAt: new Date(h.clock.now()).toISOString() });
    expect(newest.availableAt).toBe(new Date(h.clock.now() + 24 * HOUR).toISOString());
    const last = await h.call("GET", "/operator/earnings/transactions?page=3&limit=2", { token: op.token });
    expect(last.json.transactions).toHaveLength(1);
    for (const bad of ["?limit=101", "?page=0", "?days=1", "?limit=x"]) {
      const r = await h.call("GET", `/operator/earnings/transactions${bad}`, { token: op.token });
      expect(r.status).toBe(400);
      expect(r.json.error.code).toBe("VALIDATION_ERROR");
    }
    expect((await h.call("GET", "/operator/earnings?days=367", { token: op.token })).json.error.code).toBe("VALIDATION_ERROR");
    expect((await h.call("GET", "/operator/earnings")).status).toBe(401);
    await h.call("POST", `/deployments/${d.id}/stop`, { token: t.token });
    await checkMoney();
    await n.agent.close();
  });

  it("refunds a tenant from the operator's earnings, pending first, the rest from the fee, never below zero", async () => {
    const op = await operator();
    const t = await tenantWith(1000);
    // A credit a minute: each charge's fee is exact, so the figures are round.
    const n = await h.connectedNode(op.token, { hourlyRateCents: 60 });
    const d = await h.deploy(t.token, n.id, n.agent);
    await h.run(n.agent, d.spec, t.token);
    await runFor(n.agent, n.id, 50 * 60 * S); // 50 credits: 45 earned, 5 fee
    await h.call("POST", `/deployments/${d.id}/stop`, { token: t.token });
    const before = (await h.call("GET", "/credits/balance", { token: t.token })).json.balance;
    expect(await earnings(op.token)).toMatchObject({ pending: 45, available: 0 });

    // As an operator of the platform runs it, against the same database.
    const refund = (...args: string[]) =>
      run(path.join(root, "node_modules", ".bin", "tsx"), [path.join(root, "apps/control-plane/src/admin.ts"), "refund", ...args], {
        cwd: root,
        env: { ...process.env, DATABASE_URL: url },
      });
    const { stdout } = await refund(d.id, "10", "GPU", "was", "throttled");
    expect(stdout).toContain(`refunded 10 credits for ${d.id}`);
    expect(stdout).toContain("10 from the operator's earnings, 0 from the platform's fee");
    const tx = (await h.call("GET", "/credits/transactions?type=refund", { token: t.token })).json.transactions;
    expect(tx).toEqual([expect.objectContaining({ type: "refund", amount: 10, deploymentId: d.id, description: "refund: GPU was throttled" })]);
    expect((await h.call("GET", "/credits/balance", { token: t.token })).json.balance).toMatchObject({
      available: before.available + 10,
      totalUsed: before.totalUsed - 10,
    });
    const e = await earnings(op.token);
    expect(e).toMatchObject({ pending: 35, available: 0 });
    expect(e.byNode).toEqual([{ nodeId: n.id, usage: 50, fee: 5, refunded: 10, earned: 35 }]);
    const rows = (await h.call("GET", "/operator/earnings/transactions", { token: op.token })).json.transactions;
    expect(rows[0]).toMatchObject({ type: "refund", amount: -10, deploymentId: d.id, transactionId: tx[0].id });
    await checkMoney();

    // Past the hold, the rest: 35 from the operator (all they have left on it, a payout of 30 waiting on them
    // included: it fails, never sent), 5 from the fee.
    h.clock.advance(25 * HOUR);
    expect(await earnings(op.token)).toMatchObject({ pending: 0, available: 35 });
    const waiting = await h.deps.repos.payouts.request(
      {
        id: h.deps.ids("pay"),
        operatorId: op.user.id,
        amountMicro: micro(30),
        amountStableBase: 300_000,
        stableMint: "mint",
        stableDecimals: 6,
        walletAddress: op.wallet.address,
        requestedAt: h.clock.now(),
      },
      0,
    );
    if (!waiting.ok) throw new Error("payout refused");
    const all = await refund(d.id, "40", "outage");
    expect(all.stdout).toContain("35 from the operator's earnings, 5 from the platform's fee");
    expect(all.stdout).toContain(`failed payout ${waiting.payout.id} (30 credits, not sent)`);
    expect(await h.deps.repos.payouts.get(waiting.payout.id)).toMatchObject({
      status: "failed",
      error: expect.stringContaining(`refund of 40 credits for deployment ${d.id}`),
    });
    expect(await earnings(op.token)).toMatchObject({ pending: 0, available: 0, payingOut: 0 });
    await checkMoney();

    // Nothing is left to refund on it, and bad input is refused; nothing is written either way.
    for (const args of [
      [d.id, "0.000001", "again"],
      ["dep_nope", "1", "x"],
      [d.id, "-1", "x"],
      [d.id, "1e3", "x"],
      [d.id, "1"],
    ]) {
      const r = await refund(...args).catch((err) => err);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/left to refund|no deployment|credits must|usage/);
    }
    expect((await h.call("GET", "/credits/transactions?type=refund", { token: t.token })).json.transactions).toHaveLength(2);
    const books = await checkMoney();
    expect(books.refundsMicro).toBeGreaterThanOrEqual(micro(50));
    await n.agent.close();
    // Each admin command is a process of its own started through tsx: seconds each on a loaded machine.
  }, 180_000);

  it("keeps the books whole when refunds race the meter on a running deployment", async () => {
    const op = await operator();
    const t = await tenantWith(1000);
    const n = await h.connectedNode(op.token, { hourlyRateCents: 60 });
    const d = await h.deploy(t.token, n.id, n.agent);
    await h.run(n.agent, d.spec, t.token);
    await runFor(n.agent, n.id, 5 * 60 * S);
    const refund = () =>
      h.deps.repos.billing.locked(d.id, (tx, dep) =>
        h.deps.repos.earnings.refund(tx, dep, { amountMicro: micro(0.5), description: "refund: race", nowMs: h.clock.now(), ids: h.deps.ids }),
      );
    for (let i = 0; i < 5; i++) {
      h.clock.advance(60 * S);
      await h.beat(n.agent, n.id);
      const [, ...refunds] = await Promise.all([h.deps.metering.tick(), refund(), refund()]);
      for (const r of refunds) expect(r).toMatchObject({ ok: true });
    }
    await h.call("POST", `/deployments/${d.id}/stop`, { token: t.token });
    expect(await earnings(op.token)).toMatchObject({ pending: 4 });
    await checkMoney();
    await n.agent.close();
  });

  it("takes a refund from what is available first, so the hold always covers the last day's earnings in full", async () => {
    const op = await operator();
    const t = await tenantWith(1000);
    const n = await h.connectedNode(op.token, { hourlyRateCents: 60 });
    const old = await h.deploy(t.token, n.id, n.agent);
    await h.run(n.agent, old.spec, t.token);
    await runFor(n.agent, n.id, 10 * 60 * S); // 10 credits: 9 earned
    await h.call("POST", `/deployments/${old.id}/stop`, { token: t.token });
    n.agent.report(old.spec, "stopped");
    h.clock.advance(25 * HOUR);
    const young = await h.deploy(t.token, n.id, n.agent);
    await h.run(n.agent, young.spec, t.token);
    await runFor(n.agent, n.id, 20 * 60 * S); // 20 credits: 18 earned
    await h.call("POST", `/deployments/${young.id}/stop`, { token: t.token });
    expect(await earnings(op.token)).toMatchObject({ pending: 18, available: 9 });
    // A refund on the old deployment comes out of what is available; the young deployment's earnings stay held.
    const out = await h.deps.repos.billing.locked(old.id, (tx, dep) =>
      h.deps.repos.earnings.refund(tx, dep, { amountMicro: micro(5), description: "refund: test", nowMs: h.clock.now(), ids: h.deps.ids }),
    );
    expect(out).toMatchObject({ ok: true, fromOperatorMicro: micro(5), fromFeeMicro: 0 });
    expect(await earnings(op.token)).toMatchObject({ pending: 18, available: 4 });
    await checkMoney();

    // Nine days on, new earnings are held in full: an old refund does not shorten the hold.
    h.clock.advance(9 * 24 * HOUR);
    const later = await h.deploy(t.token, n.id, n.agent);
    await h.run(n.agent, later.spec, t.token);
    await runFor(n.agent, n.id, 10 * 60 * S); // 10 credits: 9 earned
    await h.call("POST", `/deployments/${later.id}/stop`, { token: t.token });
    expect(await earnings(op.token)).toMatchObject({ pending: 9, available: 22 });
    await checkMoney();
    await n.agent.close();
  });
});
