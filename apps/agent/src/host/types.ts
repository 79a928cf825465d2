// What the agent reports about its machine: the protocol's shapes, so the probe
// and the control plane's schema cannot drift apart (they were once copied here).
import type { GpuReport, NodeSpecs } from "@cm/protocol";

export type { NodeSpecs };

/** What the probe calls a disk; the protocol takes any short label, the agent only says these. */
export type DiskType = "NVMe" | "SSD" | "HDD";

/**
 * One GPU as the agent reports it. `index` is nvidia-smi's (what `--gpus device=N`
 * and NVIDIA_VISIBLE_DEVICES accept); `uuid` ("GPU-<uuid>") is stable across reboots;
 * `computeCores` and `tensorCores` are 0 when the model's SM count is unknown
 * (see gpu-architecture.ts).
 */
export type GpuInfo = GpuReport;

export interface GpuProbeResult {
  gpus: GpuInfo[];
  /** why the list is empty or partial, for the operator's log; absent when all went well */
  warning?: string;
  /** why the list is empty when nothing is wrong (a machine with no NVIDIA GPU): information, not a warning */
  note?: string;
}
