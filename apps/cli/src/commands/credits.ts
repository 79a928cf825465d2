import { intFlag, type Run, str, UsageError } from "../args";
import type { Context } from "../context";
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

export const buy: Run = async (ctx, { args, flags }) => {
  if (flags.qr === true) return buyByTransferRequest(ctx, args[0]!);
  if (!ctx.rpcUrl) throw new UsageError("credits buy pays through a Solana RPC: pass --rpc URL or set SOLANA_RPC_URL, or --qr to pay from a wallet app");
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

/**
 * Pays by a wallet app (a phone scanning the QR code, or any wallet given the link):
 * the payment names the deposit's reference, so the control plane finds and credits
 * it by itself and nothing is pasted back. The wallet that pays must be the one signed
 * in, as for any deposit.
 */
async function buyByTransferRequest(ctx: Context, packageId: string): Promise<void> {
  const { user } = await ctx.client.auth.me();
  const { deposit } = await ctx.client.credits.initiateDeposit(packageId, user.walletAddress);
  // The link is the data (a script hands it on); the code and the progress are for the person.
  if (ctx.json) ctx.out.jsonLine(deposit);
  else ctx.out.line(deposit.transferRequestUrl);
  // Loaded here so that the other commands do not load it.
  const { qrText } = await import("../qr");
  for (const row of qrText(deposit.transferRequestUrl)) ctx.out.note(row);
  ctx.out.note(
    `Scan with a wallet app holding ${user.walletAddress} to pay ${deposit.amountStable} USDC for ${credits(deposit.creditsToReceive)} credits (deposit ${deposit.depositId}, until ${deposit.expiresAt}).`,
  );
  ctx.out.note("Waiting for the payment (Ctrl-C stops waiting; a payment made later is still credited)");
  const paid = await ctx.client.credits.waitForDeposit(deposit.depositId, { signal: ctx.signal });
  const { balance } = await ctx.client.credits.balance();
  if (ctx.json) return ctx.out.jsonLine({ deposit: paid, balance });
  ctx.out.note(`+${credits(deposit.creditsToReceive)} credits (${paid.txSignature}).`);
  ctx.out.fields([
    ["available", `${credits(balance.available)} credits`],
    ["reserved", `${credits(balance.reserved)} credits`],
  ]);
}
