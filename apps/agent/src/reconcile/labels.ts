// Labels the reconciler adds to the runtime's cm.* ones: with them a restarted
// agent knows which run a container belongs to and which GPUs it holds.
import type { ContainerState } from "../runtime/types";

export const LABEL_RUN_SEQ = "cm.run-seq";
export const LABEL_GPUS = "cm.gpus";

export function runLabels(runSeq: number, gpuUuids: string[]): Record<string, string> {
  return { [LABEL_RUN_SEQ]: String(runSeq), [LABEL_GPUS]: gpuUuids.join(",") };
}

/** -1 for a container without the label (made by an older agent): older than any run. */
export function runSeqOf(container: ContainerState): number {
  const value = Number(container.labels[LABEL_RUN_SEQ]);
  return Number.isInteger(value) ? value : -1;
}

export function gpusOf(container: ContainerState): string[] {
  return (container.labels[LABEL_GPUS] ?? "").split(",").filter(Boolean);
}

/** Docker names must be unique; the run in the name keeps a new run from colliding with an old one. */
export function containerName(deploymentId: string, runSeq: number): string {
  return `cm-${deploymentId.replace(/[^a-zA-Z0-9_.-]/g, "-")}-run${runSeq}`;
}
