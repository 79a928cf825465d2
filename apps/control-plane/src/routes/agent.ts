import { AGENT_WHOAMI_PATH, AgentWhoamiResponse } from "@cm/protocol";
import type { Deps } from "../deps";
import { ApiError } from "../errors";
import { createRouter, json, type RouteFactory } from "../http/route";
import { hashSecret } from "../services/ids";

/** The longest agent token looked up: what a hello accepts. */
const MAX_AGENT_TOKEN_CHARS = 200;

/**
 * What an agent's token may ask over plain HTTP; mounted at the root (its paths are in @cm/protocol). Only a
 * lookup: saying hello on the agent socket is what takes over a node's
 * session and marks it online, which checking a token must never do.
 */
export function agentRoutes(deps: Deps, route: RouteFactory) {
  return createRouter().openapi(
    route(
      {
        method: "get",
        path: AGENT_WHOAMI_PATH,
        operationId: "agentWhoami",
        tags: ["agent"],
        summary: "Which node an agent token belongs to",
        description:
          "`Authorization: Bearer <agent token>` (the node's token, not a user's). Answers the node's id and name; changes nothing: a connected agent keeps its session and the node's status stays as it is. A retired node's token is refused. What `npm run agent -- doctor` and the installer's `--dry-run` check a token with.",
        responses: { 200: json(AgentWhoamiResponse, "The node the token belongs to") },
      },
      { errors: ["UNAUTHORIZED"] },
    ),
    async (c) => {
      const token = /^Bearer (\S+)$/i.exec(c.req.header("authorization") ?? "")?.[1];
      if (!token || token.length > MAX_AGENT_TOKEN_CHARS) throw new ApiError("UNAUTHORIZED", "send the node's agent token as Authorization: Bearer <token>");
      const node = await deps.repos.nodes.byAgentTokenHash(hashSecret(token), { includeRetired: true });
      if (!node) throw new ApiError("UNAUTHORIZED", "unknown agent token");
      if (node.retiredAt !== null)
        throw new ApiError("UNAUTHORIZED", `node ${node.id} was retired on ${new Date(node.retiredAt).toISOString()}; its token no longer works`);
      return c.json({ nodeId: node.id, name: node.name }, 200);
    },
  );
}
