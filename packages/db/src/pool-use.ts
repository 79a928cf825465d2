import type { DbHandle } from "./client";

/** What /metrics shows of the database pool: the connections this process may hold, and the runs and transactions under way. */
export type PoolUse = { readonly max: number; inFlight(): number };

/**
 * The connections one process's PostgreSQL client opens at most (client.ts); the
 * embedded database is one connection. With N replicas, N times this counts
 * against PostgreSQL's max_connections.
 */
export const PG_POOL_MAX = 10;

/**
 * Counts the handle's runs and transactions under way, from now on: each holds a
 * connection while it runs (a transaction one of its own), so more of them than
 * the pool's size means calls waiting for one. postgres.js does not say how many
 * of its connections are busy; this is what the process asks of it.
 */
export function countPoolUse(h: DbHandle): PoolUse {
  let n = 0;
  const counted =
    <A extends unknown[], T>(fn: (...a: A) => Promise<T>) =>
    async (...a: A): Promise<T> => {
      n++;
      try {
        return await fn(...a);
      } finally {
        n--;
      }
    };
  const run = h.run.bind(h);
  const transaction = h.transaction.bind(h);
  // The repositories call these through the handle at each query, so they count from here on.
  Object.assign(h, { run: counted(run), transaction: counted(transaction) });
  return { max: h.dialect === "pg" ? PG_POOL_MAX : 1, inFlight: () => n };
}
