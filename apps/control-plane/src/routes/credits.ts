import {
  BalanceResponse,
  ConfirmDepositRequest,
  ConfirmDepositResponse,
  DepositStateResponse,
  InitiateDepositRequest,
  InitiateDepositResponse,
  PackagesResponse,
  paginate,
  TransactionListQuery,
  TransactionListResponse,
} from "@cm/protocol";
import type { Deps } from "../deps";
import { presentBalance, presentTransaction } from "../http/presenters";
import { createRouter, IdParams, json, jsonBody, type RouteFactory } from "../http/route";
import { presentDeposit, presentPackage } from "../services/deposit-service";

/** Credits: balance, packages, USDC deposits and the ledger; mounted at /credits. Every route needs a bearer token. */
export function creditRoutes(deps: Deps, route: RouteFactory) {
  const tags = ["credits"];
  const { repos } = deps;

  return createRouter()
    .openapi(
      route(
        {
          method: "get",
          path: "/balance",
          operationId: "getBalance",
          tags,
          summary: "Your credit balance",
          description: "1 credit = 1 US cent. available = what you can spend; reserved = held for live deployments (one hour each).",
          responses: { 200: json(BalanceResponse, "Your balance") },
        },
        { auth: true },
      ),
      async (c) => c.json({ balance: presentBalance(await repos.ledger.balance(c.get("user").id)) }, 200),
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/packages",
          operationId: "listCreditPackages",
          tags,
          summary: "Credit packages for sale",
          description: "What POST /credits/deposit/initiate takes as packageId, with its price and the credits it grants.",
          responses: { 200: json(PackagesResponse, "The packages") },
        },
        { auth: true },
      ),
      async (c) => c.json({ packages: (await repos.deposits.packages()).map(presentPackage) }, 200),
    )
    .openapi(
      route(
        {
          method: "post",
          path: "/deposit/initiate",
          operationId: "initiateDeposit",
          tags,
          summary: "Start a USDC deposit",
          description:
            "Send amountStable of stableMint from walletAddress (your signed-in wallet) to treasuryWallet before expiresAt (30 minutes), then call confirm with the transaction signature. Or pay transferRequestUrl (Solana Pay) from any wallet, a phone scanning it as a QR code included: the payment names reference, by which it can be found on chain. An account holds at most MAX_OPEN_DEPOSITS deposits pending at once (20 by default); past it the answer is 429 TOO_MANY_OPEN_DEPOSITS: pay one, or wait until one expires.",
          request: { body: jsonBody(InitiateDepositRequest) },
          responses: { 200: json(InitiateDepositResponse, "What to pay, to whom, and by when") },
        },
        { auth: true, errors: ["PACKAGE_NOT_FOUND", "INVALID_WALLET_ADDRESS", "DEPOSIT_WALLET_MISMATCH", "PAYMENTS_NOT_CONFIGURED", "TOO_MANY_OPEN_DEPOSITS"] },
      ),
      async (c) => {
        const body = c.req.valid("json");
        const d = await deps.depositService.initiate(c.get("user"), body.packageId, body.walletAddress);
        return c.json({ deposit: presentDeposit(d) }, 200);
      },
    )
    .openapi(
      route(
        {
          method: "post",
          path: "/deposit/confirm",
          operationId: "confirmDeposit",
          tags,
          summary: "Confirm a USDC deposit with its transaction signature",
          description:
            "Idempotent: confirming again with the same signature answers the same transaction without crediting twice. TX_NOT_FOUND and CHAIN_UNAVAILABLE leave the deposit pending: retry after Retry-After seconds.",
          request: { body: jsonBody(ConfirmDepositRequest) },
          responses: { 200: json(ConfirmDepositResponse, "The deposit transaction and your new balance") },
        },
        {
          auth: true,
          errors: [
            "DEPOSIT_NOT_FOUND",
            "DEPOSIT_EXPIRED",
            "DEPOSIT_ALREADY_CONFIRMED",
            "TX_NOT_FOUND",
            "TX_FAILED",
            "MINT_MISMATCH",
            "RECIPIENT_MISMATCH",
            "AMOUNT_TOO_LOW",
            "PAYER_MISMATCH",
            "PAYMENT_AFTER_EXPIRY",
            "SIGNATURE_ALREADY_USED",
            "CHAIN_UNAVAILABLE",
          ],
        },
      ),
      async (c) => {
        const user = c.get("user");
        const body = c.req.valid("json");
        const { transaction } = await deps.depositService.confirm(user.id, body.depositId, body.txSignature);
        return c.json({ transaction: presentTransaction(transaction), newBalance: presentBalance(await repos.ledger.balance(user.id)) }, 200);
      },
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/deposits/{id}",
          operationId: "getDeposit",
          tags,
          summary: "One of your deposits",
          description:
            "pending (pay transferRequestUrl, or confirm with the signature), confirmed (txSignature paid it) or expired (past expiresAt with nothing credited). A payment whose block time is before expiresAt is still credited when it is found within DEPOSIT_GRACE_S after it, so an expired deposit can turn confirmed in that window. refusal names the latest payment found for it that did not pay it (PAYMENT_AFTER_EXPIRY, AMOUNT_TOO_LOW, ...), found by its reference or named to confirm, until a valid one credits it.",
          request: { params: IdParams },
          responses: { 200: json(DepositStateResponse, "The deposit's state") },
        },
        { auth: true, errors: ["DEPOSIT_NOT_FOUND"] },
      ),
      async (c) => c.json({ deposit: await deps.depositService.state(c.get("user").id, c.req.valid("param").id) }, 200),
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/transactions",
          operationId: "listTransactions",
          tags,
          summary: "Your ledger, newest first",
          description: "Deposits, usage (charged every minute a deployment runs) and refunds; type filters by one kind.",
          request: { query: TransactionListQuery },
          responses: { 200: json(TransactionListResponse, "A page of your transactions") },
        },
        { auth: true },
      ),
      async (c) => {
        const query = c.req.valid("query");
        const { rows, total } = await repos.ledger.list(c.get("user").id, query.type, query.page, query.limit);
        return c.json({ transactions: rows.map(presentTransaction), pagination: paginate(query.page, query.limit, total) }, 200);
      },
    );
}
