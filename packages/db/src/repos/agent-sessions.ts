import { and, eq } from "drizzle-orm";
import type { DbHandle } from "../client";

export type AgentSessionRow = { nodeId: string; replicaId: string; address: string | null; since: number };

/** Which replica holds each node's agent session (see agentSessions in schema/pg.ts). */
export function createAgentSessionsRepo(h: DbHandle) {
  const { agentSessions: s } = h.t;
  return {
    /** This replica holds the node's session now: whatever an earlier holder left is overwritten. */
    async claim(row: AgentSessionRow): Promise<void> {
      await h.run((db) =>
        db
          .insert(s)
          .values(row)
          .onConflictDoUpdate({ target: s.nodeId, set: { replicaId: row.replicaId, address: row.address, since: row.since } }),
      );
    },

    /** The session ended here: the row goes, unless another replica claimed the node meanwhile. */
    async release(nodeId: string, replicaId: string): Promise<void> {
      await h.run((db) => db.delete(s).where(and(eq(s.nodeId, nodeId), eq(s.replicaId, replicaId))));
    },

    /** Every row of a replica that stops. */
    async releaseAll(replicaId: string): Promise<void> {
      await h.run((db) => db.delete(s).where(eq(s.replicaId, replicaId)));
    },

    async holder(nodeId: string): Promise<AgentSessionRow | undefined> {
      return h.run(async (db) => (await db.select().from(s).where(eq(s.nodeId, nodeId)))[0]);
    },
  };
}
