import type { SQL } from "drizzle-orm";
import type { Db, DbHandle } from "../client";

/**
 * Runs a hand-written statement and answers the rows it changed. Raw SQL is kept
 * for the few batch statements drizzle's builder cannot express in both
 * dialects; each driver spells "execute" differently.
 */
export async function execRaw(h: DbHandle, db: Db, q: SQL): Promise<number> {
  if (h.dialect === "pg") return Number(((await db.execute(q)) as unknown as { count?: number }).count ?? 0);
  return (db as unknown as { run(q: SQL): { changes: number } }).run(q).changes;
}
