import { PayoutListQuery, PayoutListResponse, PayoutRequest, PayoutResponse, paginate } from "@cm/protocol";
import type { Deps } from "../deps";
import { createRouter, IdParams, json, jsonBody, type RouteFactory } from "../http/route";

/** Operators withdraw what their nodes earned, in USDC to the wallet they sign in with; mounted at /operator/payouts. */
export function operatorPayoutsRoutes(deps: Deps, route: RouteFactory) {
  const tags = ["operator"];
  return createRouter()
    .openapi(
      route(
        {
          method: "post",
          path: "/",
          operationId: "requestPayout",
          tags,
          summary: "Withdraw available earnings in USDC",
          description:
            "Takes amountCredits out of your available earnings at once (1 credit = 0.01 USDC, paid to the wallet you sign in with). The payout is `requested` until it may be sent: an administrator approves it (PAYOUTS=manual, the default) or, with PAYOUTS=auto, it is sent at once within the installation's daily limit (PAYOUT_DAILY_LIMIT_CREDITS; past it, it waits for the next day's room). Then `sending`: a signed transfer is recorded before it is sent, and a new one is built only after the previous one's blockhash expired without it landing, so a payout is paid exactly once whatever fails. `paid` names the transfer's signature; `failed` gives the amount back to available. The receiving token account is created if the wallet has none.",
          request: { body: jsonBody(PayoutRequest) },
          responses: { 201: json(PayoutResponse, "The payout, requested") },
        },
        { auth: true, errors: ["PAYOUT_BELOW_MINIMUM", "PAYOUT_ABOVE_DAILY_LIMIT", "INSUFFICIENT_EARNINGS", "PAYOUTS_NOT_CONFIGURED"] },
      ),
      async (c) => c.json({ payout: await deps.payouts.request(c.get("user"), c.req.valid("json").amountCredits) }, 201),
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/",
          operationId: "listPayouts",
          tags,
          summary: "Your payouts, newest first",
          description:
            "Every payout you requested, in any state: requested (error says what it waits for), sending, paid (txSignature is the transfer that landed) or failed (error says why; its amount is available again).",
          request: { query: PayoutListQuery },
          responses: { 200: json(PayoutListResponse, "A page of your payouts") },
        },
        { auth: true },
      ),
      async (c) => {
        const { page, limit } = c.req.valid("query");
        const { payouts, total } = await deps.payouts.list(c.get("user").id, page, limit);
        return c.json({ payouts, pagination: paginate(page, limit, total) }, 200);
      },
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/{id}",
          operationId: "getPayout",
          tags,
          summary: "One of your payouts",
          description: "Poll it to follow a payout to paid or failed (cm operator payout --wait does).",
          request: { params: IdParams },
          responses: { 200: json(PayoutResponse, "The payout") },
        },
        { auth: true, errors: ["PAYOUT_NOT_FOUND"] },
      ),
      async (c) => c.json({ payout: await deps.payouts.get(c.req.valid("param").id, c.get("user").id) }, 200),
    );
}
