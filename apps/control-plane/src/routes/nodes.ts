import { NodeListQuery, NodeListResponse, NodeResponse, paginate } from "@cm/protocol";
import type { Deps } from "../deps";
import { ApiError } from "../errors";
import { presentNodeDetail, presentNodeSummary } from "../http/presenters";
import { createRouter, IdParams, json, type RouteFactory } from "../http/route";

/** The public node catalogue; mounted at /nodes. */
export function nodeRoutes(deps: Deps, route: RouteFactory) {
  const { repos, clock } = deps;
  const tags = ["nodes"];
  return createRouter()
    .openapi(
      route({
        method: "get",
        path: "/",
        operationId: "listNodes",
        tags,
        summary: "Browse nodes",
        description: "Public. Newest first. Answers may be up to 1 s old (a cache this replica clears whenever it changes a node).",
        request: { query: NodeListQuery },
        responses: { 200: json(NodeListResponse, "A page of nodes") },
      }),
      async (c) => {
        const query = c.req.valid("query");
        const key = JSON.stringify(query);
        let body = deps.nodeCatalogCache.get(key);
        if (body === undefined) {
          const { page, limit, ...filter } = query;
          const { rows, total } = await repos.nodes.list(filter, page, limit);
          const now = clock.now();
          body = JSON.stringify({ nodes: rows.map((n) => presentNodeSummary(n, now)), pagination: paginate(page, limit, total) });
          deps.nodeCatalogCache.set(key, body);
        }
        // The cached answer is JSON text already: sent as is, which the route's typed c.json cannot say.
        return c.body(body, 200, { "content-type": "application/json" }) as never;
      },
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/{id}",
          operationId: "getNode",
          tags,
          summary: "A node's details",
          description:
            "Public. Adds to the catalogue's fields the operator, the full specs and GPUs, and lastHeartbeat (null until the node's agent first connects).",
          request: { params: IdParams },
          responses: { 200: json(NodeResponse, "The node") },
        },
        { errors: ["NODE_NOT_FOUND"] },
      ),
      async (c) => {
        const node = await repos.nodes.get(c.req.valid("param").id);
        if (!node) throw new ApiError("NODE_NOT_FOUND");
        return c.json({ node: presentNodeDetail(node, clock.now()) }, 200);
      },
    );
}
