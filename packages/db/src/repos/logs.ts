import { and, asc, desc, eq, gt, gte } from "drizzle-orm";
import type { DbHandle } from "../client";
import type { LogRow } from "../types";

export type NewLogLine = { seq: number; ts: string; tsMs: number; stream: "stdout" | "stderr"; message: string };

/** The API's view of the per-deployment log store; lines arrive through log-ingest.ts. */
export function createLogsRepo(h: DbHandle) {
  const { deploymentLogs: logs } = h.t;
  return {
    /** The last `tail` lines, oldest first, optionally only those at or after `sinceMs`. */
    async tail(deploymentId: string, tail: number, sinceMs?: number): Promise<LogRow[]> {
      return h.run(async (db) => {
        const rows = await db
          .select()
          .from(logs)
          .where(and(eq(logs.deploymentId, deploymentId), sinceMs !== undefined ? gte(logs.tsMs, sinceMs) : undefined))
          .orderBy(desc(logs.seq))
          .limit(tail);
        return rows.reverse();
      });
    },

    /** Up to `limit` lines after the line numbered `afterSeq`, oldest first, optionally only those at or after `sinceMs`: what a follower has not seen. */
    async after(deploymentId: string, afterSeq: number, limit: number, sinceMs?: number): Promise<LogRow[]> {
      return h.run((db) =>
        db
          .select()
          .from(logs)
          .where(and(eq(logs.deploymentId, deploymentId), gt(logs.seq, afterSeq), sinceMs !== undefined ? gte(logs.tsMs, sinceMs) : undefined))
          .orderBy(asc(logs.seq))
          .limit(limit),
      );
    },
  };
}
export type LogsRepo = ReturnType<typeof createLogsRepo>;
