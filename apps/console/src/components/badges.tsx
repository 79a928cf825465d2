import type { NodeSummary } from "@cm/sdk";

/** A node's status as a word and a colour (the word carries it: colour is not the only sign). */
export function StatusBadge({ status }: { status: NodeSummary["status"] }) {
  return <span className={`badge status-${status}`}>{status}</span>;
}

/** The node's GPUs, grouped by model: "2 × RTX 4090 · 24 GB", or "CPU only". */
export function GpuBadges({ gpus }: { gpus: NodeSummary["gpus"] }) {
  if (gpus.length === 0) return <span className="badge gpu-none">CPU only</span>;
  const groups = new Map<string, { count: number; vramMb: number }>();
  for (const g of gpus) {
    const seen = groups.get(g.name);
    groups.set(g.name, { count: (seen?.count ?? 0) + 1, vramMb: g.vramMb });
  }
  return (
    <>
      {[...groups].map(([name, g]) => (
        <span key={name} className="badge gpu">
          {g.count > 1 ? `${g.count} × ` : ""}
          {name} · {Math.round(g.vramMb / 1024)} GB
        </span>
      ))}
    </>
  );
}
