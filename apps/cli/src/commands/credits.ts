import { intFlag, type Run, str, UsageError } from "../args";
import { credits } from "./format";

export const balance: Run = async (ctx) => {
  const answer = await ctx.client.credits.balance();
  if (ctx.json) return ctx.out.json(answer);
  const b = answer.balance;
  ctx.out.fields([
    ["available", `${credits(b.available)} credits ($${(b.available / 100).toFixed(2)})`],
    ["reserved", `${credits(b.reserved)} credits (held for live deployments)`],
    ["used", `${credits(b.totalUsed)} credits, all time`],
  ]);
};

export const packages: Run = async (ctx) => {
  const answer = await ctx.client.credits.packages();
  if (ctx.json) return ctx.out.json(answer);
  ctx.out.table(
    ["ID", "NAME", "PRICE", "CREDITS", "BONUS"],
    answer.packages.map((p) => [p.id, p.name, `${p.priceStable} USDC`, credits(p.creditsToReceive), p.bonusPercent ? `+${p.bonusPercent}%` : "-"]),
  );
};

export const history: Run = async (ctx, { flags }) => {
  const type = str(flags, "type");
  if (type !== undefined && !["deposit", "usage", "refund"].includes(type))
    throw new UsageError(`--type is one of deposit, usage, refund, not ${JSON.stringify(type)}`);
  const answer = await ctx.client.credits.transactions({
    type: type as "deposit" | "usage" | "refund" | undefined,
    page: intFlag(flags, "page"),
    limit: intFlag(flags, "limit"),
  });
  if (ctx.json) return ctx.out.json(answer);
  ctx.out.table(
    ["WHEN", "TYPE", "AMOUNT", "DESCRIPTION", "REFERENCE"],
    answer.transactions.map((t) => [
      t.createdAt,
      t.type,
      `${t.amount > 0 ? "+" : ""}${credits(t.amount)}`,
      t.description,
      t.txSignature ?? t.deploymentId ?? "",
    ]),
  );
  const p = answer.pagination;
  ctx.out.note(answer.transactions.length === 0 ? "No transactions." : `page ${p.page} of ${p.totalPages} (${p.total} transactions)`);
};

export const buy: Run = async (ctx, { args }) => {
  if (!ctx.rpcUrl) throw new UsageError("credits buy pays through a Solana RPC: pass --rpc URL or set SOLANA_RPC_URL");
  const signer = await ctx.signer();
  const answer = await ctx.client.credits.buy(args[0]!, signer, {
    rpcUrl: ctx.rpcUrl,
    onStep: (step, detail) =>
      ctx.out.note(step === "initiated" ? `Paying ${detail}` : step === "sent" ? `Sent ${detail}; waiting for the chain` : "Confirmed on chain; crediting"),
  });
  if (ctx.json) return ctx.out.json(answer);
  ctx.out.note(`+${credits(answer.transaction.amount)} credits (${answer.transaction.txSignature}).`);
  ctx.out.fields([
    ["available", `${credits(answer.newBalance.available)} credits`],
    ["reserved", `${credits(answer.newBalance.reserved)} credits`],
  ]);
};
