export type { DockerEngineFacts, HostProbe, SystemHostProbeOptions } from "./probe";
export { DEFAULT_DOCKER_DATA_ROOT, DEFAULT_NVIDIA_SMI_TIMEOUT_MS, SystemHostProbe } from "./probe";
export type { DiskType, GpuInfo, GpuProbeResult, NodeSpecs } from "./types";
