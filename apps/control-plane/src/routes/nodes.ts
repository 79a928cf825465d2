import { NodeListQuery, NodeListResponse, NodeResponse, paginate } from "@cm/protocol";
import type { Deps } from "../deps";
import { ApiError } from "../errors";
import { presentNodeDetail, presentNodeSummary } from "../http/presenters";
import { createRouter, IdParams, json, type RouteFactory } from "../http/route";
import { createNodeUptimes } from "../services/node-uptime";

/** `?region=eu-west&...` of a request's URL, as sent: what the catalogue's cache is keyed on. */
const rawQuery = (url: string) => {
  const at = url.indexOf("?");
  return at < 0 ? "" : url.slice(at);
};

/** The public node catalogue; mounted at /nodes. */
export function nodeRoutes(deps: Deps, route: RouteFactory) {
  const { repos, clock } = deps;
  const tags = ["nodes"];
  const nodeUptimes = createNodeUptimes(repos);
  const router = createRouter();
  // A cached page is answered before the query is validated, needing no database: only a query that
  // was valid made one, and the same text validates the same. Validating it for every request took
  // 12% of the catalogue's CPU under load (bench/README.md, catalogue).
  router.get("/", async function cachedCatalogue(c, next) {
    const body = deps.nodeCatalogCache.get(rawQuery(c.req.url));
    if (body === undefined) return next();
    return c.body(body, 200, { "content-type": "application/json" });
  });
  return router
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
        const { page, limit, ...filter } = c.req.valid("query");
        const body = await deps.nodeCatalogCache.fill(rawQuery(c.req.url), async () => {
          const { rows, total } = await repos.nodes.list(filter, page, limit);
          const uptime = await nodeUptimes(rows, clock.now());
          return JSON.stringify({ nodes: rows.map((n) => presentNodeSummary(n, uptime(n))), pagination: paginate(page, limit, total) });
        });
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
            "Public. Adds to the catalogue's fields the operator, the full specs and GPUs, lastHeartbeat (null until the node's agent first connects), maintenanceSince, and uptime over the last 24 hours, 7 days and 30 days. Uptime is counted from heartbeats: each adds the time since the node's previous one, at most the 3 heartbeat intervals after which a silent node goes offline, to the clock hour it falls in (node_uptime_hours); a window's percent is that time over the window, which reaches back to the start of the clock hour 24 hours (7 days, 30 days) ago, or to the node's registration for a younger node.",
          request: { params: IdParams },
          responses: { 200: json(NodeResponse, "The node") },
        },
        { errors: ["NODE_NOT_FOUND"] },
      ),
      async (c) => {
        const node = await repos.nodes.get(c.req.valid("param").id);
        if (!node) throw new ApiError("NODE_NOT_FOUND");
        const uptime = await nodeUptimes([node], clock.now());
        return c.json({ node: presentNodeDetail(node, uptime(node)) }, 200);
      },
    );
}
