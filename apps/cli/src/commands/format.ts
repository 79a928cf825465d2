import type { Deployment, NodeSummary } from "@cm/sdk";

export const cents = (n: number) => `${Number.isInteger(n) ? n : n.toFixed(2)}¢/h`;
export const credits = (n: number) => `${Number.isInteger(n) ? n : n.toFixed(2)}`;
export const gb = (mb: number) => `${Math.round(mb / 1024)} GB`;
export const gpus = (list: NodeSummary["gpus"]) => (list.length === 0 ? "-" : summarize(list.map((g) => `${g.name} ${gb(g.vramMb)}`)));
export const endpoints = (d: Deployment) => d.endpoints.map((e) => `${e.url} -> ${e.internalPort}${e.ready ? "" : " (not ready)"}`);

/** "2x A100 80 GB" rather than the same GPU twice. */
function summarize(items: string[]): string {
  const counts = new Map<string, number>();
  for (const i of items) counts.set(i, (counts.get(i) ?? 0) + 1);
  return [...counts].map(([i, n]) => (n > 1 ? `${n}x ${i}` : i)).join(", ");
}

export function statusLine(d: Deployment): string {
  const why = [d.statusReason, d.exitCode === null ? undefined : `exit code ${d.exitCode}`].filter(Boolean).join(", ");
  return `${d.status}${why ? ` (${why})` : ""}`;
}
