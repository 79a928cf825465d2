import type { NodeRow, Repos, UserRow } from "@cm/db";
import { type CreateNodeRequest, DEFAULT_MAINTENANCE_REASON, type MaintenanceRequest, type UpdateNodeRequest } from "@cm/protocol";
import type { z } from "zod";
import { ApiError } from "../errors";
import type { EventBus } from "./events";
import { type Clock, hashSecret, type IdGenerator, newSecret } from "./ids";

export type OperatorServiceOptions = { repos: Repos; clock: Clock; ids: IdGenerator; events: EventBus; maxNodesPerAccount: number };

/** The nodes an account operates: enrolment (its token, the quota, becoming an operator), listing, changes, maintenance and retirement. */
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

    /** Its own node, else NODE_NOT_FOUND: another operator's node is not told apart from none. */
    async mine(id: string, operatorId: string): Promise<NodeRow> {
      const node = await repos.nodes.get(id);
      if (!node || node.operatorId !== operatorId) throw new ApiError("NODE_NOT_FOUND", `you operate no node ${id}`);
      return node;
    },

    /** Changes what the operator set at registration; a deployment keeps the rate it was created with, and nothing running is stopped. */
    async updateNode(id: string, operatorId: string, patch: UpdateNodeRequest): Promise<NodeRow> {
      const node = await repos.nodes.update(id, operatorId, patch);
      if (!node) throw new ApiError("NODE_NOT_FOUND", `you operate no node ${id}`);
      events.emit("node-changed", id);
      return node;
    },

    /** In maintenance the node takes no new deployment and its running ones go on; out of it, its heartbeats say online or offline again. */
    async setMaintenance(id: string, operatorId: string, body: MaintenanceRequest): Promise<NodeRow> {
      const reason = body.enabled ? (body.reason ?? DEFAULT_MAINTENANCE_REASON) : null;
      const node = await repos.nodes.setMaintenance(id, operatorId, reason, clock.now());
      if (!node) throw new ApiError("NODE_NOT_FOUND", `you operate no node ${id}`);
      events.emit("node-changed", id);
      return node;
    },

    async retireNode(id: string, operatorId: string): Promise<void> {
      if (!(await repos.nodes.retire(id, operatorId, clock.now()))) throw new ApiError("NODE_NOT_FOUND");
      events.emit("node-retired", id);
    },
  };
}
export type OperatorService = ReturnType<typeof createOperatorService>;
