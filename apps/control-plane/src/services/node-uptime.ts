import { type NodeRow, type Repos, UPTIME_HOUR_MS, type UptimeWindows, uptimePercents } from "@cm/db";

/**
 * The clock hours a heartbeat flush may still add to: a beat's own hour and
 * the one before it (repos.nodes.recordHeartbeats), and the one before that
 * for a flush that ran late across an hour's turn.
 */
const LIVE_HOURS = 3;
/** Nodes whose settled sums are kept; past it they are all read again. */
const MAX_SETTLED = 100_000;

const add = (a: UptimeWindows | undefined, b: UptimeWindows | undefined): UptimeWindows | undefined =>
  a && b ? { last24h: a.last24h + b.last24h, last7d: a.last7d + b.last7d, last30d: a.last30d + b.last30d } : (a ?? b);

/**
 * Each node's uptime percents over 24 h, 7 d and 30 d, for a page of nodes at
 * once. The hours older than the last LIVE_HOURS no longer change, so their
 * sums are kept per node until the clock hour turns, and each read sums only
 * the live hours: a catalogue page of 20 nodes online for 30 days summed
 * 14,400 rows each time it was made (3-6 ms on SQLite, the event loop blocked
 * meanwhile; bench/README.md, catalogue). A flush held up for hours (a long
 * database outage) adds to hours already summed: they show from the next hour.
 */
export function createNodeUptimes(repos: Repos) {
  const settled = new Map<string, { hour: number; heard: UptimeWindows | undefined }>();
  return async function nodeUptimes(rows: readonly NodeRow[], nowMs: number): Promise<(n: NodeRow) => UptimeWindows> {
    const hour = Math.floor(nowMs / UPTIME_HOUR_MS);
    const liveFrom = hour - LIVE_HOURS + 1;
    // This read's own copy: another read, at the next hour, may replace what the map holds meanwhile.
    const older = new Map<string, UptimeWindows | undefined>();
    const unsummed: string[] = [];
    for (const n of rows) {
      const kept = settled.get(n.id);
      if (kept?.hour === hour) older.set(n.id, kept.heard);
      else unsummed.push(n.id);
    }
    if (unsummed.length > 0) {
      const sums = await repos.nodes.uptime(unsummed, nowMs, { beforeHour: liveFrom });
      if (settled.size + unsummed.length > MAX_SETTLED) settled.clear();
      for (const id of unsummed) {
        older.set(id, sums.get(id));
        settled.set(id, { hour, heard: sums.get(id) });
      }
    }
    const live = await repos.nodes.uptime(
      rows.map((n) => n.id),
      nowMs,
      { fromHour: liveFrom },
    );
    return (n) => uptimePercents(n.createdAt, add(older.get(n.id), live.get(n.id)), nowMs);
  };
}
export type NodeUptimes = ReturnType<typeof createNodeUptimes>;
