import { and, desc, eq, gte, lt, max } from "drizzle-orm";
import type { DbHandle } from "../client";
import type { LogRow } from "../types";

export type NewLogLine = { seq: number; ts: string; tsMs: number; stream: "stdout" | "stderr"; message: string };

/** Per-deployment log store, bounded: older lines are dropped past `keepLines`. */
export function createLogsRepo(h: DbHandle, keepLines = 10_000) {
  const { deploymentLogs: logs } = h.t;
  return {
    /** Idempotent by (deployment, seq): a batch resent after a reconnect adds nothing twice. */
    async append(deploymentId: string, lines: NewLogLine[]): Promise<number> {
      if (lines.length === 0) return 0;
      return h.transaction(async (db) => {
        let inserted = 0;
        for (let i = 0; i < lines.length; i += 500) {
          const chunk = lines.slice(i, i + 500).map((l) => ({ deploymentId, ...l }));
          const r = await db.insert(logs).values(chunk).onConflictDoNothing().returning({ id: logs.id });
          inserted += r.length;
        }
        const last = lines[lines.length - 1]!.seq;
        await db.delete(logs).where(and(eq(logs.deploymentId, deploymentId), lt(logs.seq, last - keepLines + 1)));
        return inserted;
      });
    },
    async lastSeq(deploymentId: string): Promise<number> {
      return h.run(async (db) => {
        const [r] = await db.select({ m: max(logs.seq) }).from(logs).where(eq(logs.deploymentId, deploymentId));
        return Number(r?.m ?? 0);
      });
    },
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
    async removeAll(deploymentId: string) {
      await h.run((db) => db.delete(logs).where(eq(logs.deploymentId, deploymentId)));
    },
  };
}
export type LogsRepo = ReturnType<typeof createLogsRepo>;
