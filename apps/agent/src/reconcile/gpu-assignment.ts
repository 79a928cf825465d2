// Whole GPUs, never shared: a deployment gets gpuCount GPUs that no running
// container holds. Holdings come from the cm.gpus labels of running containers,
// so they survive an agent restart without any state file.
import type { GpuInfo } from "../host/types";

export type GpuPick = { ok: true; uuids: string[] } | { ok: false; reason: string };

export function pickGpus(gpus: readonly GpuInfo[], held: ReadonlySet<string>, count: number): GpuPick {
  if (count === 0) return { ok: true, uuids: [] };
  if (gpus.length < count) {
    return { ok: false, reason: `this deployment needs ${count} GPU${count === 1 ? "" : "s"} but this node has ${gpus.length}` };
  }
  // Lowest indexes first: predictable for operators reading nvidia-smi.
  const free = [...gpus].sort((a, b) => a.index - b.index).filter((gpu) => !held.has(gpu.uuid));
  if (free.length < count) {
    return { ok: false, reason: `this deployment needs ${count} GPU${count === 1 ? "" : "s"} but only ${free.length} of the node's ${gpus.length} are free` };
  }
  return { ok: true, uuids: free.slice(0, count).map((gpu) => gpu.uuid) };
}
