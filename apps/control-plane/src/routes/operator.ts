import { CreateNodeRequest, CreateNodeResponse, OperatorNodeListQuery, OperatorNodeListResponse, SuccessResponse } from "@cm/protocol";
import type { Deps } from "../deps";
import { presentNodeDetail } from "../http/presenters";
import { createRouter, IdParams, json, jsonBody, type RouteFactory } from "../http/route";
import { fixedWindows } from "../middleware/rate-limit";

/** The nodes a signed-in account operates; mounted at /operator/nodes. */
export function operatorRoutes(deps: Deps, route: RouteFactory) {
  const { operator, clock } = deps;
  const tags = ["operator"];
  // Enrolment is open to any signed-in account: bounded per account so nobody fills the catalogue.
  const registrations = fixedWindows({ limit: deps.config.NODE_REGISTRATIONS_PER_HOUR, windowMs: 3_600_000, clock });
  return createRouter()
    .openapi(
      route(
        {
          method: "post",
          path: "/",
          operationId: "registerNode",
          tags,
          summary: "Register a node you operate",
          description:
            "Answers the agent token once; it is stored hashed. Marks you an operator. An account operates at most MAX_NODES_PER_ACCOUNT nodes at once (1000 by default; retired ones do not count) and registers at most NODE_REGISTRATIONS_PER_HOUR (60) an hour.",
          request: { body: jsonBody(CreateNodeRequest) },
          responses: { 201: json(CreateNodeResponse, "The node, and the token its agent signs in with") },
        },
        { auth: true, errors: ["NODE_QUOTA_EXCEEDED", "RATE_LIMITED"] },
      ),
      async (c) => {
        const user = c.get("user");
        registrations.hit(user.id);
        const { node, agentToken } = await operator.registerNode(user, c.req.valid("json"));
        return c.json({ node: presentNodeDetail(node, clock.now()), agentToken }, 201);
      },
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/",
          operationId: "listOperatorNodes",
          tags,
          summary: "Nodes you operate",
          description: "With their details, whatever their status; retired nodes are left out unless `all=true` (then their retiredAt is set).",
          request: { query: OperatorNodeListQuery },
          responses: { 200: json(OperatorNodeListResponse, "Your nodes, retired ones only with all=true") },
        },
        { auth: true },
      ),
      async (c) => {
        const now = clock.now();
        const rows = await operator.nodes(c.get("user").id, c.req.valid("query").all === true);
        return c.json(
          { nodes: rows.map((n) => ({ ...presentNodeDetail(n, now), retiredAt: n.retiredAt === null ? null : new Date(n.retiredAt).toISOString() })) },
          200,
        );
      },
    )
    .openapi(
      route(
        {
          method: "delete",
          path: "/{id}",
          operationId: "retireNode",
          tags,
          summary: "Retire a node",
          description:
            "The node disappears from the catalogue (its operator still sees it with `GET /operator/nodes?all=true`) and its agent token stops working. Its deployments are stopped, their tenants told and their billing ended; a connected agent is told to drain: it stops and removes every container and network sandbox it made for the node, shipping their last log lines, then exits. An agent away at the time drains when it next connects.",
          request: { params: IdParams },
          responses: { 200: json(SuccessResponse, "The node is retired") },
        },
        { auth: true, errors: ["NODE_NOT_FOUND"] },
      ),
      async (c) => {
        const { id } = c.req.valid("param");
        await operator.retireNode(id, c.get("user").id);
        return c.json({ success: true, message: `node ${id} retired` }, 200);
      },
    );
}
