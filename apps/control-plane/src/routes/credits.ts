import {
  BalanceResponse, ConfirmDepositRequest, ConfirmDepositResponse, InitiateDepositRequest, InitiateDepositResponse,
  PackagesResponse, TransactionListQuery, TransactionListResponse, paginate,
} from "@cm/protocol";
import type { ApiRouter } from "../http/api-router";
import { presentBalance, presentTransaction } from "../http/presenters";
import { presentDeposit, presentPackage } from "../services/deposit-service";
import type { Deps } from "../deps";

export function creditRoutes(api: ApiRouter, deps: Deps) {
  const tag = "credits";
  const { repos } = deps;

  api.get("/credits/balance", { tag, auth: true, summary: "Your credit balance", description: "1 credit = 1 US cent. available = what you can spend; reserved = held for live deployments (one hour each).", response: BalanceResponse }, async (c) =>
    c.json({ balance: presentBalance(await repos.ledger.balance(c.get("user").id)) }),
  );

  api.get("/credits/packages", { tag, auth: true, summary: "Credit packages for sale", response: PackagesResponse }, async (c) =>
    c.json({ packages: (await repos.deposits.packages()).map(presentPackage) }),
  );

  api.post(
    "/credits/deposit/initiate",
    {
      tag, auth: true, summary: "Start a USDC deposit",
      description: "Send amountStable of stableMint from walletAddress (your signed-in wallet) to treasuryWallet before expiresAt (30 minutes), then call confirm with the transaction signature.",
      body: InitiateDepositRequest, response: InitiateDepositResponse,
      errors: ["PACKAGE_NOT_FOUND", "INVALID_WALLET_ADDRESS", "DEPOSIT_WALLET_MISMATCH", "PAYMENTS_NOT_CONFIGURED"],
    },
    async (c, { body }) => {
      const d = await deps.depositService.initiate(c.get("user"), body.packageId, body.walletAddress);
      return c.json({ deposit: presentDeposit(d) });
    },
  );

  api.post(
    "/credits/deposit/confirm",
    {
      tag, auth: true, summary: "Confirm a USDC deposit with its transaction signature",
      description: "Idempotent: confirming again with the same signature answers the same transaction without crediting twice. TX_NOT_FOUND and CHAIN_UNAVAILABLE leave the deposit pending: retry after Retry-After seconds.",
      body: ConfirmDepositRequest, response: ConfirmDepositResponse,
      errors: ["DEPOSIT_NOT_FOUND", "DEPOSIT_EXPIRED", "DEPOSIT_ALREADY_CONFIRMED", "TX_NOT_FOUND", "TX_FAILED", "MINT_MISMATCH", "RECIPIENT_MISMATCH", "AMOUNT_TOO_LOW", "PAYER_MISMATCH", "PAYMENT_AFTER_EXPIRY", "SIGNATURE_ALREADY_USED", "CHAIN_UNAVAILABLE"],
    },
    async (c, { body }) => {
      const user = c.get("user");
      const { transaction } = await deps.depositService.confirm(user.id, body.depositId, body.txSignature);
      return c.json({ transaction: presentTransaction(transaction), newBalance: presentBalance(await repos.ledger.balance(user.id)) });
    },
  );

  api.get("/credits/transactions", { tag, auth: true, summary: "Your ledger, newest first", query: TransactionListQuery, response: TransactionListResponse }, async (c, { query }) => {
    const { rows, total } = await repos.ledger.list(c.get("user").id, query.type, query.page, query.limit);
    return c.json({ transactions: rows.map(presentTransaction), pagination: paginate(query.page, query.limit, total) });
  });
}
