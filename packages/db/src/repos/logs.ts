import { and, asc, desc, eq, gt, gte, lt, lte, min, sql } from "drizzle-orm";
import type { DbHandle } from "../client";
import type { LogRow } from "../types";

export type NewLogLine = { seq: number; ts: string; tsMs: number; stream: "stdout" | "stderr"; message: string };

/**
 * Lines whose size is read per query while measuring a read: the first chunk is
 * small (a page of 16 KiB lines holds 16), each next one twice as large, up to
 * 1,000 (about 2.5 ms on SQLite).
 */
const FIRST_CHUNK = 64;
const MEASURE_CHUNK = 1_000;
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The API's view of the per-deployment log store; lines arrive through log-ingest.ts. */
export function createLogsRepo(h: DbHandle) {
  const { deploymentLogs: logs } = h.t;
  // The stored text's size without loading it: both engines read it from the row's header.
  const bytes = sql<number>`octet_length(${logs.message})`.mapWith(Number);
  const since = (sinceMs?: number) => (sinceMs !== undefined ? gte(logs.tsMs, sinceMs) : undefined);

  /**
   * How far from `fromSeq` (excluded) a read of at most `lines` lines and `maxBytes`
   * of text reaches, going `dir` (from the end when `fromSeq` is undefined): the last line number it takes, how many lines
   * that is, and whether lines were left out for the bytes. Sizes only, in
   * chunks, each its own turn of the event loop: never the text itself.
   */
  async function reach(deploymentId: string, dir: "up" | "down", fromSeq: number | undefined, lines: number, maxBytes: number, sinceMs?: number) {
    let total = 0;
    let taken = 0;
    let edge: number | undefined;
    let cursor = fromSeq;
    for (let size = FIRST_CHUNK; taken < lines; size = Math.min(MEASURE_CHUNK, size * 2)) {
      const want = Math.min(size, lines - taken);
      const chunk = await h.run((db) =>
        db
          .select({ seq: logs.seq, bytes })
          .from(logs)
          .where(
            and(
              eq(logs.deploymentId, deploymentId),
              cursor === undefined ? undefined : dir === "up" ? gt(logs.seq, cursor) : lt(logs.seq, cursor),
              since(sinceMs),
            ),
          )
          .orderBy(dir === "up" ? asc(logs.seq) : desc(logs.seq))
          .limit(want),
      );
      for (const r of chunk) {
        // The first line always goes, however long: a reader must be able to pass it.
        if (taken > 0 && total + r.bytes > maxBytes) return { edge, taken, cut: true };
        total += r.bytes;
        taken += 1;
        edge = r.seq;
      }
      if (chunk.length < want) break;
      cursor = chunk.at(-1)!.seq;
      await nextTurn();
    }
    return { edge, taken, cut: false };
  }

  /** Drops rows off the `from` end until they hold at most `maxBytes` (keeping one): a line stored between measuring and reading may have pushed them over. */
  function within(rows: LogRow[], maxBytes: number, from: "start" | "end"): LogRow[] {
    let total = 0;
    for (const r of rows) total += Buffer.byteLength(r.message);
    while (rows.length > 1 && total > maxBytes) total -= Buffer.byteLength((from === "start" ? rows.shift() : rows.pop())!.message);
    return rows;
  }

  /**
   * The last `tail` lines, oldest first, optionally only those at or after
   * `sinceMs`, as many of the newest as hold at most `maxBytes` of text
   * (always one); `truncated` when older ones were left out for the bytes.
   */
  async function newest(deploymentId: string, o: { tail: number; maxBytes: number; sinceMs?: number }): Promise<{ rows: LogRow[]; truncated: boolean }> {
    const { edge, taken, cut } = await reach(deploymentId, "down", undefined, o.tail, o.maxBytes, o.sinceMs);
    if (edge === undefined) return { rows: [], truncated: false };
    const read = await h.run((db) =>
      db
        .select()
        .from(logs)
        .where(and(eq(logs.deploymentId, deploymentId), gte(logs.seq, edge), since(o.sinceMs)))
        .orderBy(desc(logs.seq))
        .limit(taken),
    );
    const count = read.length;
    const rows = within(read.reverse(), o.maxBytes, "start");
    return { rows, truncated: cut || rows.length < count };
  }

  return {
    newest,

    /** The last `tail` lines, oldest first, optionally only those at or after `sinceMs`, however much text they hold: for tests and tools. */
    async tail(deploymentId: string, tail: number, sinceMs?: number): Promise<LogRow[]> {
      return (await newest(deploymentId, { tail, maxBytes: Number.POSITIVE_INFINITY, sinceMs })).rows;
    },

    /** The number of the oldest of the last `tail` lines (at or after `sinceMs`), without reading any: where a stream's tail starts. */
    async tailStart(deploymentId: string, tail: number, sinceMs?: number): Promise<number | undefined> {
      return h.run(async (db) => {
        const where = and(eq(logs.deploymentId, deploymentId), since(sinceMs));
        const [nth] = await db
          .select({ seq: logs.seq })
          .from(logs)
          .where(where)
          .orderBy(desc(logs.seq))
          .limit(1)
          .offset(tail - 1);
        if (nth) return nth.seq;
        const [oldest] = await db
          .select({ seq: min(logs.seq) })
          .from(logs)
          .where(where);
        return oldest?.seq ?? undefined;
      });
    },

    /**
     * Up to `limit` lines after the line numbered `afterSeq`, oldest first, holding
     * at most `maxBytes` of text (always one line), optionally only those at or
     * after `sinceMs`: what a follower has not seen, a page at a time.
     */
    async after(deploymentId: string, afterSeq: number, limit: number, sinceMs?: number, maxBytes = Number.POSITIVE_INFINITY): Promise<LogRow[]> {
      let upTo: number | undefined;
      if (Number.isFinite(maxBytes)) {
        const { edge, taken } = await reach(deploymentId, "up", afterSeq, limit, maxBytes, sinceMs);
        if (edge === undefined) return [];
        upTo = edge;
        limit = taken;
      }
      const rows = await h.run((db) =>
        db
          .select()
          .from(logs)
          .where(and(eq(logs.deploymentId, deploymentId), gt(logs.seq, afterSeq), upTo !== undefined ? lte(logs.seq, upTo) : undefined, since(sinceMs)))
          .orderBy(asc(logs.seq))
          .limit(limit),
      );
      return Number.isFinite(maxBytes) ? within(rows, maxBytes, "end") : rows;
    },
  };
}
export type LogsRepo = ReturnType<typeof createLogsRepo>;
