import type { Region } from "@cm/protocol/lists";
import { agentInstallCommand, type OperatorNode, type Payout } from "@cm/sdk";
import { intFlag, type Run, str, UsageError } from "../args";
import { cents, credits, gpus } from "./format";

export const add: Run = async (ctx, { flags }) => {
  const missing = ["name", "region", "country", "rate", "max"].filter((f) => flags[f] === undefined);
  if (missing.length) throw new UsageError(`missing ${missing.map((m) => `--${m}`).join(", ")}`);
  const answer = await ctx.client.operator.registerNode({
    name: str(flags, "name")!,
    // Unchecked here: the API's refusal names the field and the regions.
    region: str(flags, "region") as Region,
    country: str(flags, "country")!.toUpperCase(),
    hourlyRateCents: intFlag(flags, "rate")!,
    maxDeployments: intFlag(flags, "max")!,
  });
  if (ctx.json) return ctx.out.json(answer);
  ctx.out.line(answer.node.id);
  ctx.out.note(
    `Enrolled ${answer.node.id}. The agent token is shown this once. On the GPU machine, in a directory holding a release's install-cm-agent.sh, its cm-agent tarball and SHA256SUMS (the agent's guide, "Install from a release"), run:`,
  );
  ctx.out.line(agentInstallCommand(ctx.api, answer.agentToken));
  if (RUNS_FROM_CHECKOUT) {
    ctx.out.note(`Or from a checkout of this repository on that machine: ${checkoutInstallCommand(ctx.api, answer.agentToken)}`);
    ctx.out.note(`(or in the foreground: ${agentCommand(ctx.api, answer.agentToken)})`);
  }
};

/**
 * cm from its sources (tsx, `npm run cm`): its user has a checkout, and may run the agent from
 * one. The released cm (one bundled .mjs) never names commands its user has no checkout for.
 */
const RUNS_FROM_CHECKOUT = import.meta.url.endsWith(".ts");

/*
 * The release's installer line is the SDK's agentInstallCommand, which the web console shows too.
 * The checkout commands below keep the token in the environment for its reason: every user of
 * the machine reads arguments with `ps`.
 */
/** The release line's equivalent from a checkout: scripts/install-agent.sh builds the agent and installs it as a service. */
export const checkoutInstallCommand = (api: string, token: string) =>
  `AGENT_TOKEN=${token} sudo --preserve-env=AGENT_TOKEN scripts/install-agent.sh --control-plane ${api}`;
/** An agent in the foreground, from a checkout. */
export const agentCommand = (api: string, token: string) => `AGENT_TOKEN=${token} npm run agent -- --control-plane ${api}`;

export const nodes: Run = async (ctx, { flags }) => {
  const answer = await ctx.client.operator.nodes({ all: flags.all === true });
  if (ctx.json) return ctx.out.json(answer);
  ctx.out.table(
    ["ID", "NAME", "STATUS", "REGION", "GPUS", "RATE", "SLOTS", "AGENT", "LAST HEARTBEAT"],
    answer.nodes.map((n) => [
      n.id,
      n.name,
      n.retiredAt ? `retired ${n.retiredAt}` : n.maintenanceReason !== null ? `maintenance: ${n.maintenanceReason}` : n.status,
      n.region,
      gpus(n.gpus),
      cents(n.hourlyRateCents),
      `${n.activeDeployments}/${n.maxDeployments}`,
      agent(n.agentVersion, n.agentUpdate),
      n.lastHeartbeat ?? "never",
    ]),
  );
  if (answer.nodes.length === 0) ctx.out.note("You operate no nodes yet: cm operator add --help");
  if (answer.nodes.some((n) => n.agentUpdate === "recommended" || n.agentUpdate === "required"))
    ctx.out.note("Upgrade an agent with the next release's install-cm-agent.sh on its machine (the agent's guide, \"Install from a release\").");
};

/** The agent's version, and whether to upgrade it. */
const agent = (version: string | null, update: string | null) =>
  version === null ? "-" : update === "required" ? `${version} (upgrade required)` : update === "recommended" ? `${version} (upgrade recommended)` : version;

/** Changes what the node was registered with; only the flags given change. */
export const set: Run = async (ctx, { args, flags }) => {
  const body = {
    name: str(flags, "name"),
    region: str(flags, "region") as Region | undefined,
    country: str(flags, "country")?.toUpperCase(),
    hourlyRateCents: intFlag(flags, "rate"),
    maxDeployments: intFlag(flags, "max-deployments"),
  };
  const given = Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined));
  if (Object.keys(given).length === 0) throw new UsageError("give at least one of --name, --region, --country, --rate, --max-deployments");
  const node = await ctx.client.operator.updateNode(args[0]!, given);
  if (ctx.json) return ctx.out.json({ node });
  ctx.out.fields(nodeFields(node));
  if (given.hourlyRateCents !== undefined) ctx.out.note("The new rate applies to deployments created from now on; running ones keep theirs.");
};

/** Pauses a node for maintenance (no new deployments, running ones go on) or ends it. */
export const maintenance: Run = async (ctx, { args, flags }) => {
  const [id, mode] = args as [string, string];
  if (mode !== "on" && mode !== "off") throw new UsageError(`say on or off, not ${JSON.stringify(mode)}`);
  if (mode === "off" && flags.reason !== undefined) throw new UsageError("--reason goes with on");
  const reason = str(flags, "reason");
  const node = await ctx.client.operator.setMaintenance(id, { enabled: mode === "on", ...(reason !== undefined ? { reason } : {}) });
  if (ctx.json) return ctx.out.json({ node });
  ctx.out.fields(nodeFields(node));
  ctx.out.note(
    mode === "on"
      ? `In maintenance: it takes no new deployments, and what runs there goes on. End it with: cm operator maintenance ${id} off`
      : "Out of maintenance: it takes deployments again while its agent is connected.",
  );
};

/** What is on one of your nodes, newest first, with what each earned you. */
export const deployments: Run = async (ctx, { args, flags }) => {
  const answer = await ctx.client.operator.nodeDeployments(args[0]!, { page: intFlag(flags, "page"), limit: intFlag(flags, "limit") });
  if (ctx.json) return ctx.out.json(answer);
  ctx.out.table(
    ["ID", "STATUS", "IMAGE", "PORTS", "GPUS", "RATE", "EARNED", "STARTED"],
    answer.deployments.map((d) => [
      d.id,
      d.status,
      d.image,
      [...d.ports.map(String), ...d.tcpPorts.map((p) => `tcp:${p}`)].join(",") || "-",
      String(d.gpuCount),
      cents(d.hourlyRateCents),
      credits(d.earned),
      d.startedAt ?? "-",
    ]),
  );
  const p = answer.pagination;
  ctx.out.note(answer.deployments.length === 0 ? "Nothing is on this node." : `page ${p.page} of ${p.totalPages} (${p.total} deployments)`);
};

const nodeFields = (n: OperatorNode): Array<[string, string | undefined]> => [
  ["id", n.id],
  ["name", n.name],
  ["status", n.status],
  ["maintenance", n.maintenanceReason ?? undefined],
  ["region", `${n.region} (${n.country})`],
  ["rate", cents(n.hourlyRateCents)],
  ["deployments", `${n.activeDeployments} of ${n.maxDeployments}`],
];

/** What your nodes earned; with --transactions, the rows it adds up, a page at a time. */
export const earnings: Run = async (ctx, { flags }) => {
  if (flags.transactions === true) {
    const answer = await ctx.client.operator.earningTransactions({ page: intFlag(flags, "page"), limit: intFlag(flags, "limit") });
    if (ctx.json) return ctx.out.json(answer);
    ctx.out.table(
      ["WHEN", "TYPE", "AMOUNT", "NODE", "DEPLOYMENT", "AVAILABLE"],
      answer.transactions.map((t) => [t.createdAt, t.type, `${t.amount > 0 ? "+" : ""}${credits(t.amount)}`, t.nodeId, t.deploymentId, t.availableAt]),
    );
    const p = answer.pagination;
    ctx.out.note(answer.transactions.length === 0 ? "No earnings yet." : `page ${p.page} of ${p.totalPages} (${p.total} rows)`);
    return;
  }
  const answer = await ctx.client.operator.earnings({ days: intFlag(flags, "days") });
  if (ctx.json) return ctx.out.json(answer);
  const e = answer.earnings;
  ctx.out.fields([
    ["pending", `${credits(e.pending)} credits (the last ${e.holdHours} h, held; refunds come out of available first)`],
    ["available", `${credits(e.available)} credits ($${(e.available / 100).toFixed(2)})`],
    ["paying out", `${credits(e.payingOut)} credits (payouts requested or being sent)`],
    ["paid out", `${credits(e.paidOut)} credits`],
    ["fee", `${e.feePercent}% of each charge`],
  ]);
  const row = (s: { usage: number; fee: number; refunded: number; earned: number }) => [
    credits(s.usage),
    credits(s.fee),
    credits(s.refunded),
    credits(s.earned),
  ];
  if (e.byNode.length === 0) return ctx.out.note("Your nodes have earned nothing yet.");
  ctx.out.table(
    ["NODE", "USAGE", "FEE", "REFUNDED", "EARNED"],
    e.byNode.map((n) => [n.nodeId, ...row(n)]),
  );
  ctx.out.table(
    ["DAY", "USAGE", "FEE", "REFUNDED", "EARNED"],
    e.byDay.map((d) => [d.date, ...row(d)]),
  );
};

/** Withdraws available earnings in USDC to the signed-in wallet; with --wait, follows the payout until it is paid or failed. */
export const payout: Run = async (ctx, { args, flags }) => {
  const raw = args[0]!;
  if (!/^\d+$/.test(raw)) throw new UsageError(`CREDITS is a whole number of credits (1 credit = 0.01 USDC), not ${JSON.stringify(raw)}`);
  const timeoutS = intFlag(flags, "timeout");
  const requested = await ctx.client.operator.payout(Number(raw));
  if (flags.wait !== true) {
    if (ctx.json) return ctx.out.json({ payout: requested });
    ctx.out.fields(payoutFields(requested));
    ctx.out.note("Requested. See where it is with: cm operator payouts");
    return;
  }
  ctx.out.note(`Requested ${requested.id}: ${credits(requested.amountCredits)} credits (${requested.amountStable} USDC) to ${requested.walletAddress}.`);
  const show = (p: Payout) => ctx.out.note(`  ${new Date().toISOString().slice(11, 19)}  ${payoutStatus(p)}`);
  const done = await ctx.client.operator.waitForPayout(requested.id, {
    signal: ctx.signal,
    onChange: show,
    ...(timeoutS === undefined ? {} : { timeoutMs: timeoutS * 1000 }),
  });
  if (ctx.json) ctx.out.json({ payout: done });
  else ctx.out.fields(payoutFields(done));
  if (done.status === "paid") return;
  ctx.out.note(`Payout failed: ${done.error ?? "no reason given"}. Nothing was paid; its ${credits(done.amountCredits)} credits are available again.`);
  return 1;
};

// `error` is why a payout failed, or what an open one waits for (an administrator, the daily limit, the RPC): beside its status either way.
const payoutStatus = (p: Payout) => `${p.status}${p.error ? ` (${p.error})` : ""}`;

const payoutFields = (p: Payout): Array<[string, string | undefined]> => [
  ["id", p.id],
  ["status", payoutStatus(p)],
  ["amount", `${credits(p.amountCredits)} credits (${p.amountStable} USDC)`],
  ["wallet", p.walletAddress],
  ["signature", p.txSignature],
  ["requested", p.requestedAt],
  ["paid", p.paidAt],
];

/** Your payouts, newest first, a page at a time. */
export const payouts: Run = async (ctx, { flags }) => {
  const answer = await ctx.client.operator.payouts({ page: intFlag(flags, "page"), limit: intFlag(flags, "limit") });
  if (ctx.json) return ctx.out.json(answer);
  ctx.out.table(
    ["ID", "STATUS", "CREDITS", "USDC", "REQUESTED", "SIGNATURE"],
    answer.payouts.map((p) => [p.id, p.status, credits(p.amountCredits), String(p.amountStable), p.requestedAt, shortSignature(p.txSignature)]),
  );
  // What an open payout waits for (an administrator, the daily limit, the RPC) or why one failed: the API's `error`, said under the table.
  for (const payout of answer.payouts) if (payout.error) ctx.out.note(`${payout.id} ${payout.status}: ${payout.error}`);
  const p = answer.pagination;
  ctx.out.note(
    answer.payouts.length === 0
      ? "No payouts yet: cm operator payout --help"
      : `page ${p.page} of ${p.totalPages} (${p.total} payouts); --json has the whole signatures`,
  );
};

/** A signature (88 characters) cut to what tells two apart in a table. */
const shortSignature = (s: string | undefined) => (s ? `${s.slice(0, 8)}...${s.slice(-8)}` : "-");

/**
 * Retiring cannot be undone and ends tenants' deployments: say what runs there
 * and ask, unless --yes. Without a terminal to ask at, --yes is required.
 */
export const retire: Run = async (ctx, { args, flags }) => {
  const id = args[0]!;
  if (flags.yes !== true) {
    if (!process.stdin.isTTY)
      throw new UsageError(`retiring ${id} cannot be undone and stops what runs there; pass --yes to retire it without a terminal to confirm at`);
    const node = (await ctx.client.operator.nodes()).nodes.find((n) => n.id === id);
    // Not yours or gone: the API says so below, with nothing to confirm.
    if (node) {
      const running =
        node.activeDeployments === 0 ? "runs no deployment" : `runs ${node.activeDeployments} deployment${node.activeDeployments === 1 ? "" : "s"}`;
      ctx.out.note(`${node.name} (${node.id}, ${node.status}) ${running}.`);
      ctx.out.note(
        "Retiring it stops them (their tenants are told, billing ends), its agent removes their containers and exits, and its token stops working. This cannot be undone.",
      );
      if (!(await confirm(`Retire ${node.name}? [y/N] `, ctx.signal))) {
        ctx.out.note("Not retired.");
        return;
      }
    }
  }
  const answer = await ctx.client.operator.retireNode(id);
  if (ctx.json) return ctx.out.json(answer);
  ctx.out.note(`${answer.message}.`);
};

/** Asks on stderr and reads one line from the terminal: yes only for y or yes. */
async function confirm(question: string, signal: AbortSignal): Promise<boolean> {
  const { createInterface } = await import("node:readline/promises");
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(question, { signal })).trim());
  } finally {
    rl.close();
  }
}
