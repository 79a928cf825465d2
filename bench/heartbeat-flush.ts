/**
 * Question: what does counting uptime add to a heartbeat flush? One flush
 * writes a second's heartbeats: 1,000 of them for 10,000 agents beating every
 * 10 s. Since issue 28 it is one upsert into node_uptime_hours (the gap since
 * each node's last heartbeat, by clock hour) and then the last_heartbeat
 * UPDATE, in one transaction; the baseline is that UPDATE alone, as it was
 * before, on the same database in the same run.
 *
 *   npx tsx bench/heartbeat-flush.ts       (FLUSHES, KINDS to change)
 *
 * Goal: a flush well under the 1 s between flushes, on both databases.
 */

import { createPgDatabase } from "@cm/db/testing";
import { sql } from "drizzle-orm";
import { testConfig } from "../apps/control-plane/src/config";
import { createDeps } from "../apps/control-plane/src/deps";
import { createLogger } from "../apps/control-plane/src/services/logger";
import { execRaw } from "../packages/db/src/repos/raw";
import { seedNodes } from "./lib/seed-nodes";

const flushes = Number(process.env.FLUSHES ?? 50);
const kinds = (process.env.KINDS ?? "sqlite,postgres").split(",");
const NODES = 10_000;
const PER_FLUSH = 1_000;
const GAP_CAP_MS = 30_000;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)]!;

for (const kind of kinds) {
  const url = kind === "postgres" ? (await createPgDatabase()).url : `file:/tmp/cm-bench-beats-${process.pid}.db`;
  const deps = await createDeps(testConfig({ DATABASE_URL: url, LOG_LEVEL: "silent" }), { log: createLogger("silent") });
  await seedNodes(deps, NODES);
  // Every node heard from once, so each flush's beats have a gap to count.
  let atMs = 1_700_000_200_000;
  const all = Array.from({ length: NODES }, (_, i) => [`node_bench${i}`, atMs] as const);
  await deps.repos.nodes.recordHeartbeats(all, GAP_CAP_MS);

  /** The last_heartbeat UPDATE alone, as a flush was before uptime was counted. */
  const updateOnly = (beats: ReadonlyArray<readonly [string, number]>) => {
    const rows = sql.join(
      beats.map(([id, ms]) => sql`(${id}, cast(${ms} as bigint))`),
      sql`, `,
    );
    const h = deps.repos.handle;
    return h.run((db) =>
      execRaw(
        h,
        db,
        sql`with beat(id, ms) as (values ${rows})
        update nodes set last_heartbeat = beat.ms from beat
        where nodes.id = beat.id and (nodes.last_heartbeat is null or nodes.last_heartbeat < beat.ms)`,
      ),
    );
  };

  const times: Record<"before" | "now", number[]> = { before: [], now: [] };
  for (let f = 0; f < flushes; f++) {
    // Each round: the next 1,000 nodes beat 10 s later, once by each way, alternating which goes first.
    for (const way of f % 2 === 0 ? (["before", "now"] as const) : (["now", "before"] as const)) {
      atMs += 10_000;
      const beats = Array.from({ length: PER_FLUSH }, (_, i) => [`node_bench${(f * PER_FLUSH + i) % NODES}`, atMs] as const);
      const t0 = performance.now();
      if (way === "now") await deps.repos.nodes.recordHeartbeats(beats, GAP_CAP_MS);
      else await updateOnly(beats);
      times[way].push(performance.now() - t0);
    }
  }
  await deps.close();
  const show = (xs: number[]) => `median ${median(xs).toFixed(1)} ms, p99 ${p99(xs).toFixed(1)} ms`;
  console.log(
    `${kind.padEnd(9)} ${PER_FLUSH} beats over ${NODES} nodes, ${flushes} flushes each: UPDATE alone ${show(times.before)}; upsert + UPDATE ${show(times.now)}`,
  );
}
