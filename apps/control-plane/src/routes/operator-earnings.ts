import { EarningsQuery, EarningsResponse, EarningTransactionListQuery, EarningTransactionListResponse, paginate } from "@cm/protocol";
import type { Deps } from "../deps";
import { createRouter, json, type RouteFactory } from "../http/route";

/** What the nodes a signed-in account operates have earned; mounted at /operator/earnings. */
export function operatorEarningsRoutes(deps: Deps, route: RouteFactory) {
  const tags = ["operator"];
  return createRouter()
    .openapi(
      route(
        {
          method: "get",
          path: "/",
          operationId: "getOperatorEarnings",
          tags,
          summary: "What your nodes earned",
          description:
            "Every usage charge on your nodes pays you the charge less the platform's fee (PLATFORM_FEE_PERCENT, 10 by default, rounded down to the micro-credit in your favour). Earnings are pending for EARNINGS_HOLD_HOURS (24 by default), then available; a refund to a tenant comes out of your earnings on that deployment (what is available first, so the hold always covers your recent earnings in full). pending + available + payingOut + paidOut is all you earned. In credits (1 credit = 1 US cent). An account that operates nothing sees zeros.",
          request: { query: EarningsQuery },
          responses: { 200: json(EarningsResponse, "Your earnings, with per-node and per-day breakdowns") },
        },
        { auth: true },
      ),
      async (c) => c.json({ earnings: await deps.earnings.summary(c.get("user").id, c.req.valid("query").days) }, 200),
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/transactions",
          operationId: "listOperatorEarnings",
          tags,
          summary: "Your earnings ledger, newest first",
          description: "One row per usage charge on your nodes (your part of it) and one per refund that took some back.",
          request: { query: EarningTransactionListQuery },
          responses: { 200: json(EarningTransactionListResponse, "A page of your earnings rows") },
        },
        { auth: true },
      ),
      async (c) => {
        const { page, limit } = c.req.valid("query");
        const { transactions, total } = await deps.earnings.transactions(c.get("user").id, page, limit);
        return c.json({ transactions, pagination: paginate(page, limit, total) }, 200);
      },
    );
}
