import { and, desc, eq, gte } from "drizzle-orm";
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
  };
}
export type LogsRepo = ReturnType<typeof createLogsRepo>;
