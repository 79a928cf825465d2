// CPU and memory limits for a container: the spec's when it gives them, else a
// fair share of the node. A GPU deployment gets the share of CPU and RAM that
// its GPUs are of the node's GPUs (1 of 8 GPUs: 1/8 of the cores), the usual
// convention of GPU clouds; a CPU-only one gets a quarter of the node. The
// cores are a hard cap only when the spec says so (its cpuLimit, "quota" when
// absent, as the control plane sent before it said): a default is a weight.
import { type CpuLimit, usableRamMb as usableOf } from "@cm/protocol";

export interface NodeCapacity {
  cpuThreads: number;
  ramMb: number;
  gpuCount: number;
}

export interface ContainerResources {
  cpuCores: number;
  cpuLimit: CpuLimit;
  memoryMb: number;
}

export const CPU_ONLY_SHARE = 0.25;
const MIN_CPU_CORES = 1;
const MIN_MEMORY_MB = 256;

export function containerResources(
  spec: { cpuCores?: number; cpuLimit?: CpuLimit; memoryMb?: number; gpuCount: number },
  node: NodeCapacity,
): ContainerResources {
  const share = spec.gpuCount > 0 && node.gpuCount > 0 ? Math.min(1, spec.gpuCount / node.gpuCount) : CPU_ONLY_SHARE;
  // RAM kept for the host, Docker and the agent itself, as the control plane counts it.
  const usableRamMb = usableOf(node.ramMb);
  const fairCpu = Math.max(MIN_CPU_CORES, Math.round(node.cpuThreads * share * 100) / 100);
  const fairMemoryMb = Math.max(MIN_MEMORY_MB, Math.floor(usableRamMb * share));
  // A spec asking for more than the node has would make Docker refuse to start the container.
  const asked = spec.cpuCores !== undefined && spec.cpuCores > 0;
  const cpuCores = asked ? spec.cpuCores! : fairCpu;
  const memoryMb = spec.memoryMb !== undefined && spec.memoryMb > 0 ? spec.memoryMb : fairMemoryMb;
  return {
    cpuCores: node.cpuThreads > 0 ? Math.min(cpuCores, node.cpuThreads) : cpuCores,
    // A fair share the spec does not name is the agent's default, never a cap.
    cpuLimit: asked ? (spec.cpuLimit ?? "quota") : "weight",
    memoryMb: usableRamMb > 0 ? Math.min(memoryMb, Math.max(usableRamMb, MIN_MEMORY_MB)) : memoryMb,
  };
}

/** Docker's own /dev/shm size, and the least a deployment gets. */
const MIN_SHM_MB = 64;

/**
 * /dev/shm: a quarter of the memory limit (PyTorch's dataloaders pass batches
 * through it, and Docker's 64 MB breaks them). Its pages count against the
 * memory limit anyway; the size keeps one tenant's tmpfs from being unbounded.
 */
export function shmSizeMb(memoryMb: number): number {
  return Math.max(MIN_SHM_MB, Math.floor(memoryMb / 4));
}
