import type { NodeRow } from "@cm/db";
import {
  agentUpdateLevel,
  CreateNodeRequest,
  CreateNodeResponse,
  MaintenanceRequest,
  OperatorNodeDeploymentListQuery,
  OperatorNodeDeploymentListResponse,
  OperatorNodeListQuery,
  OperatorNodeListResponse,
  OperatorNodeResponse,
  paginate,
  SuccessResponse,
  UpdateNodeRequest,
} from "@cm/protocol";
import type { Deps } from "../deps";
import { presentNodeDetail, presentOperatorNodeDeployment } from "../http/presenters";
import { createRouter, IdParams, json, jsonBody, type RouteFactory } from "../http/route";
import { fixedWindows } from "../middleware/rate-limit";
import { createNodeUptimes } from "../services/node-uptime";

/** The nodes a signed-in account operates; mounted at /operator/nodes. */
export function operatorRoutes(deps: Deps, route: RouteFactory) {
  const { operator, clock, repos } = deps;
  const tags = ["operator"];
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  const nodeUptimes = createNodeUptimes(repos);
  /** Each node as its operator sees it: the detail, and its retirement. */
  async function present(rows: NodeRow[]) {
    const uptime = await nodeUptimes(rows, clock.now());
    return rows.map((n) => ({
      ...presentNodeDetail(n, uptime(n)),
      retiredAt: iso(n.retiredAt),
      agentVersion: n.agentVersion,
      agentUpdate: agentUpdateLevel(n.agentVersion),
    }));
  }
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
        const [presented] = await present([node]);
        const { retiredAt: _, agentVersion: _v, agentUpdate: _u, ...detail } = presented!;
        return c.json({ node: detail, agentToken }, 201);
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
        const rows = await operator.nodes(c.get("user").id, c.req.valid("query").all === true);
        return c.json({ nodes: await present(rows) }, 200);
      },
    )
    .openapi(
      route(
        {
          method: "patch",
          path: "/{id}",
          operationId: "updateNode",
          tags,
          summary: "Change a node you operate",
          description:
            "Its name, region, country, hourlyRateCents or maxDeployments, validated as at registration; only the fields given change. A new rate applies to deployments created after it: each deployment keeps the rate fixed on it when it was created. Lowering maxDeployments stops nothing that runs; the node takes no new deployment until fewer run than the new maximum.",
          // Every field is optional, so no body at all is the empty patch: nothing changes.
          request: { params: IdParams, body: { ...jsonBody(UpdateNodeRequest), required: false } },
          responses: { 200: json(OperatorNodeResponse, "The node as it is now") },
        },
        { auth: true, errors: ["NODE_NOT_FOUND"] },
      ),
      async (c) => {
        const node = await operator.updateNode(c.req.valid("param").id, c.get("user").id, c.req.valid("json"));
        return c.json({ node: (await present([node]))[0]! }, 200);
      },
    )
    .openapi(
      route(
        {
          method: "post",
          path: "/{id}/maintenance",
          operationId: "setNodeMaintenance",
          tags,
          summary: "Put a node in maintenance, or take it out",
          description:
            "enabled true: the node's status is maintenance, with the reason (maintenanceReason) shown to tenants in the catalogue and the node's detail. It takes no new deployment: a create naming it answers 409 NODE_IN_MAINTENANCE with the reason, and placement passes it over (counted as in maintenance in NO_NODE_FITS). What runs there goes on running and is billed as before; its agent's heartbeats and reconnections leave it in maintenance. enabled false: back to online or offline, as its heartbeats say. Putting a node already in maintenance there again changes the reason, not maintenanceSince.",
          request: { params: IdParams, body: jsonBody(MaintenanceRequest) },
          responses: { 200: json(OperatorNodeResponse, "The node as it is now") },
        },
        { auth: true, errors: ["NODE_NOT_FOUND"] },
      ),
      async (c) => {
        const node = await operator.setMaintenance(c.req.valid("param").id, c.get("user").id, c.req.valid("json"));
        return c.json({ node: (await present([node]))[0]! }, 200);
      },
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/{id}/deployments",
          operationId: "listNodeDeployments",
          tags,
          summary: "What runs on a node you operate",
          description:
            "The deployments on the node (its agent has not yet removed them), newest first, live or not: their status, image, ports, resources, the rate each was created with and what each has earned you so far (your part of its usage charges, less refunds). Never the tenant's env, command or endpoints.",
          request: { params: IdParams, query: OperatorNodeDeploymentListQuery },
          responses: { 200: json(OperatorNodeDeploymentListResponse, "A page of the node's deployments") },
        },
        { auth: true, errors: ["NODE_NOT_FOUND"] },
      ),
      async (c) => {
        const node = await operator.mine(c.req.valid("param").id, c.get("user").id);
        const { page, limit, status } = c.req.valid("query");
        const { rows, total } = await repos.deployments.listOnNode({ nodeId: node.id, status, page, limit });
        const earned = await repos.earnings.earnedByDeployment(rows.map((d) => d.id));
        return c.json({ deployments: rows.map((d) => presentOperatorNodeDeployment(d, earned.get(d.id) ?? 0)), pagination: paginate(page, limit, total) }, 200);
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
