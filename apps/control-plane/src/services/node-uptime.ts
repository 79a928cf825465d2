import { type NodeRow, type Repos, type UptimeWindows, uptimePercents } from "@cm/db";

/** Each node's uptime percents over 24 h, 7 d and 30 d, read for all of them in one query. */
export async function nodeUptimes(repos: Repos, rows: readonly NodeRow[], nowMs: number): Promise<(n: NodeRow) => UptimeWindows> {
  const heard = await repos.nodes.uptime(
    rows.map((n) => n.id),
    nowMs,
  );
  return (n) => uptimePercents(n.createdAt, heard.get(n.id), nowMs);
}
