import { CreateNodeRequest, CreateNodeResponse, NodeListQuery, NodeListResponse, NodeResponse, OperatorNodeListResponse, paginate } from "@cm/protocol";
import { z } from "zod";
import { ApiError } from "../errors";
import { param, type ApiRouter } from "../http/api-router";
import { presentNodeDetail, presentNodeSummary } from "../http/presenters";
import { fixedWindows } from "../middleware/rate-limit";
import { hashSecret, newSecret } from "../services/ids";
import type { Deps } from "../deps";

export function nodeRoutes(api: ApiRouter, deps: Deps) {
  const { repos, clock } = deps;
  // Enrolment is open to any signed-in account: bounded per account so nobody fills the catalogue.
  const registrations = fixedWindows({ limit: deps.config.NODE_REGISTRATIONS_PER_HOUR, windowMs: 3_600_000, clock });

  api.get(
    "/nodes",
    { tag: "nodes", summary: "Browse nodes", description: "Public. Newest first. Answers may be up to 1 s old (a cache this replica clears whenever it changes a node).", query: NodeListQuery, response: NodeListResponse },
    async (c, { query }) => {
      const key = JSON.stringify(query);
      let body = deps.nodeCatalogCache.get(key);
      if (body === undefined) {
        const { page, limit, ...filter } = query;
        const { rows, total } = await repos.nodes.list(filter, page, limit);
        const now = clock.now();
        body = JSON.stringify({ nodes: rows.map((n) => presentNodeSummary(n, now)), pagination: paginate(page, limit, total) });
        deps.nodeCatalogCache.set(key, body);
      }
      return c.body(body, 200, { "content-type": "application/json" });
    },
  );

  api.get("/nodes/:id", { tag: "nodes", summary: "A node's details", response: NodeResponse, errors: ["NODE_NOT_FOUND"] }, async (c) => {
    const node = await repos.nodes.get(param(c, "id"));
    if (!node) throw new ApiError("NODE_NOT_FOUND");
    return c.json({ node: presentNodeDetail(node, clock.now()) });
  });

  api.post(
    "/operator/nodes",
    {
      tag: "operator", summary: "Register a node you operate", auth: true, body: CreateNodeRequest, response: CreateNodeResponse, status: 201, errors: ["NODE_QUOTA_EXCEEDED", "RATE_LIMITED"],
      description: "Answers the agent token once; it is stored hashed. Marks you an operator. An account operates at most MAX_NODES_PER_ACCOUNT nodes at once (1000 by default; retired ones do not count) and registers at most NODE_REGISTRATIONS_PER_HOUR (60) an hour.",
    },
    async (c, { body }) => {
      const user = c.get("user");
      registrations.hit(user.id);
      const agentToken = newSecret("cmn");
      const node = await repos.nodes.createWithinQuota({ id: deps.ids("node"), operatorId: user.id, ...body, agentTokenHash: hashSecret(agentToken), createdAt: clock.now() }, deps.config.MAX_NODES_PER_ACCOUNT);
      if (!node) throw new ApiError("NODE_QUOTA_EXCEEDED", `this account already operates ${deps.config.MAX_NODES_PER_ACCOUNT} nodes, as many as one account may; retire one (DELETE /operator/nodes/:id) first`);
      if (!user.isOperator) await repos.auth.setOperator(user.id);
      deps.events.emit("node-changed", node.id);
      return c.json({ node: presentNodeDetail(node, clock.now()), agentToken }, 201);
    },
  );

  api.get("/operator/nodes", { tag: "operator", summary: "Nodes you operate", auth: true, response: OperatorNodeListResponse }, async (c) => {
    const now = clock.now();
    return c.json({ nodes: (await repos.nodes.listByOperator(c.get("user").id)).map((n) => presentNodeDetail(n, now)) });
  });

  api.delete(
    "/operator/nodes/:id",
    { tag: "operator", summary: "Retire a node", description: "The node disappears from the catalogue and its agent token stops working.", auth: true, response: z.object({ success: z.boolean(), message: z.string() }), errors: ["NODE_NOT_FOUND"] },
    async (c) => {
      const id = param(c, "id");
      if (!(await repos.nodes.retire(id, c.get("user").id, clock.now()))) throw new ApiError("NODE_NOT_FOUND");
      deps.events.emit("node-retired", id);
      return c.json({ success: true, message: `node ${id} retired` });
    },
  );
}
