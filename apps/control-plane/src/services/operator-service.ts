import type { NodeRow, Repos, UserRow } from "@cm/db";
import type { CreateNodeRequest } from "@cm/protocol";
import type { z } from "zod";
import { ApiError } from "../errors";
import type { EventBus } from "./events";
import { type Clock, hashSecret, type IdGenerator, newSecret } from "./ids";

export type OperatorServiceOptions = { repos: Repos; clock: Clock; ids: IdGenerator; events: EventBus; maxNodesPerAccount: number };

/** The nodes an account operates: enrolment (its token, the quota, becoming an operator), listing and retirement. */
export function createOperatorService({ repos, clock, ids, events, maxNodesPerAccount }: OperatorServiceOptions) {
  return {
    /** Answers the agent token once; only its hash is stored. */
    async registerNode(user: Pick<UserRow, "id" | "isOperator">, body: z.infer<typeof CreateNodeRequest>): Promise<{ node: NodeRow; agentToken: string }> {
      const agentToken = newSecret("cmn");
      const node = await repos.nodes.createWithinQuota(
        { id: ids("node"), operatorId: user.id, ...body, agentTokenHash: hashSecret(agentToken), createdAt: clock.now() },
        maxNodesPerAccount,
      );
      if (!node)
        throw new ApiError(
          "NODE_QUOTA_EXCEEDED",
          `this account already operates ${maxNodesPerAccount} nodes, as many as one account may; retire one (DELETE /operator/nodes/:id) first`,
        );
      if (!user.isOperator) await repos.auth.setOperator(user.id);
      events.emit("node-changed", node.id);
      return { node, agentToken };
    },

    nodes: (operatorId: string, includeRetired: boolean) => repos.nodes.listByOperator(operatorId, { includeRetired }),

    async retireNode(id: string, operatorId: string): Promise<void> {
      if (!(await repos.nodes.retire(id, operatorId, clock.now()))) throw new ApiError("NODE_NOT_FOUND");
      events.emit("node-retired", id);
    },
  };
}
export type OperatorService = ReturnType<typeof createOperatorService>;
