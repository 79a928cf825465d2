// Local shapes of what the agent reports about its machine. They mirror
// @cm/protocol's NodeSpecs and Gpu (same field names, integers where the schema
// says int) so the lead can swap them for the shared zod types without renames.

export interface NodeSpecs {
  /** "manufacturer brand", e.g. "AMD EPYC 7763" */
  cpuModel: string;
  /** physical cores */
  cpuCores: number;
  /** logical processors (hardware threads) */
  cpuThreads: number;
  ramMb: number;
  /** size of the filesystem holding the Docker data root, in decimal GB */
  diskGb: number;
  diskType: DiskType;
  /** link speed of the default-route interface; 0 when the kernel does not say */
  networkSpeedMbps: number;
  /** "distro release (kernel)", e.g. "Ubuntu 22.04.4 LTS (5.15.0-105-generic)" */
  os: string;
  /** Docker engine version, learned by runtime/ and passed in to the probe */
  containerVersion: string;
}

export type DiskType = "NVMe" | "SSD" | "HDD";

export interface GpuInfo {
  /** nvidia-smi index: what `--gpus device=N` and NVIDIA_VISIBLE_DEVICES accept */
  index: number;
  /** "GPU-<uuid>", stable across reboots unlike the index */
  uuid: string;
  name: string;
  vramMb: number;
  /** CUDA compute capability "major.minor"; "" when neither driver nor model table knows it */
  computeVersion: string;
  driverVersion: string;
  brand: string;
  /** FP32 CUDA cores; 0 when the model's SM count is unknown (see gpu-architecture.ts) */
  computeCores: number;
  /** tensor cores; 0 when unknown or the architecture has none */
  tensorCores: number;
}

export interface GpuProbeResult {
  gpus: GpuInfo[];
  /** why the list is empty or partial, for the operator's log; absent when all went well */
  warning?: string;
}
