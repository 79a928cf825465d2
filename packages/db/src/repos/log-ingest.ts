import { LOG_LINES_KEPT } from "@cm/protocol";
import { and, desc, eq, inArray, lt, max, type SQL, sql } from "drizzle-orm";
import type { DbHandle } from "../client";
import type { NewLogLine } from "./logs";
import { execRaw } from "./raw";

export type StoredLogCursor = { seq: number; dockerTs: string | null };

/**
 * The agent-facing side of the log store: batches of thousands of lines at a
 * time. A batch is one INSERT whose rows travel as a single JSON parameter, so
 * neither dialect pays for thousands of bound parameters: in batches of 5,000,
 * the 500-row multi-VALUES inserts of logs.ts ran at 24k lines/s on PostgreSQL
 * and 78k on SQLite, this at 79k and 186k. Reads and the API's view stay in logs.ts.
 */
export function createLogIngest(h: DbHandle, keepLines = LOG_LINES_KEPT) {
  const { deploymentLogs: logs } = h.t;

  function insertJson(json: string, deploymentId: string): SQL {
    if (h.dialect === "pg") {
      return sql`insert into deployment_logs (deployment_id, seq, ts, ts_ms, stream, message)
        select ${deploymentId}, x.seq, x.ts, x.ts_ms, x.stream, x.message
        from json_to_recordset(${json}::json) as x(seq integer, ts text, ts_ms bigint, stream text, message text)
        on conflict do nothing`;
    }
    return sql`insert into deployment_logs (deployment_id, seq, ts, ts_ms, stream, message)
      select ${deploymentId}, value ->> 'seq', value ->> 'ts', value ->> 'ts_ms', value ->> 'stream', value ->> 'message'
      from json_each(${json}) where true
      on conflict do nothing`;
  }

  return {
    /**
     * Idempotent by (deployment, seq); keeps the `keepLines` highest-numbered
     * lines, whatever order, gaps or repeats the batches come in (trimming below
     * the batch's own highest number let batches numbered downwards pile up).
     * Answers how many lines were new.
     */
    async append(deploymentId: string, lines: NewLogLine[]): Promise<number> {
      if (lines.length === 0) return 0;
      // PostgreSQL text cannot hold NUL; a container may print one.
      const clean = (m: string) => (m.includes("\u0000") ? m.replaceAll("\u0000", "\uFFFD") : m);
      const json = JSON.stringify(lines.map((l) => ({ seq: l.seq, ts: l.ts, ts_ms: l.tsMs, stream: l.stream, message: clean(l.message) })));
      return h.transaction(async (db) => {
        const inserted = await execRaw(h, db, insertJson(json, deploymentId));
        // The keepLines-th highest number: an index walk of keepLines entries (0.7 ms on SQLite); none while fewer are stored.
        const lowestKept = db
          .select({ seq: logs.seq })
          .from(logs)
          .where(eq(logs.deploymentId, deploymentId))
          .orderBy(desc(logs.seq))
          .limit(1)
          .offset(keepLines - 1);
        await db.delete(logs).where(and(eq(logs.deploymentId, deploymentId), lt(logs.seq, sql`(${lowestKept})`)));
        return inserted;
      });
    },

    /** Where each deployment's shipping resumes: its newest stored line, or seq 0 when none is stored. */
    async cursors(deploymentIds: string[]): Promise<Map<string, StoredLogCursor>> {
      const out = new Map<string, StoredLogCursor>();
      if (deploymentIds.length === 0) return out;
      const rows = await h.run(async (db) => {
        const newest = db
          .select({ id: logs.deploymentId, seq: max(logs.seq).as("newest_seq") })
          .from(logs)
          .where(inArray(logs.deploymentId, deploymentIds))
          .groupBy(logs.deploymentId)
          .as("newest");
        return db
          .select({ id: logs.deploymentId, seq: logs.seq, ts: logs.ts })
          .from(logs)
          .innerJoin(newest, and(eq(logs.deploymentId, newest.id), eq(logs.seq, newest.seq)));
      });
      for (const r of rows) out.set(r.id, { seq: Number(r.seq), dockerTs: r.ts });
      return out;
    },
  };
}
export type LogIngest = ReturnType<typeof createLogIngest>;
