// What a new deployment holds of its node and what it costs an hour: GPU clouds
// rent GPUs, not machines, and split a host's CPU and memory in proportion.
import type { NodeRow, TemplateRow } from "@cm/db";
import {
  CPU_ONLY_DEFAULT_CPU_CORES,
  CPU_ONLY_DEFAULT_MEMORY_MB,
  type CpuLimit,
  type CreateDeploymentRequest,
  MILLICORES_PER_CORE,
  MIN_CPU_CORES,
  MIN_MEMORY_MB,
  usableRamMb,
} from "@cm/protocol";
import { ApiError } from "../errors";

export type Holding = { gpuCount: number; cpuMillicores: number; cpuLimit: CpuLimit; memoryMb: number; diskGb: number | null };
type Asked = Pick<CreateDeploymentRequest, "gpuCount" | "cpuCores" | "memoryMb" | "diskGb">;
type NodeSize = Pick<NodeRow, "id" | "gpuCount" | "cpuCores" | "ramMb" | "maxDeployments" | "specs" | "diskDefaultGb">;

/**
 * What the deployment holds: what the tenant asked for, else the node's share
 * per GPU (2 of 8 GPUs: a quarter of its cores and memory), else for no GPU a
 * small machine's worth (2 cores, 4 GB) or the node's share per slot when that
 * is less, so a node still takes maxDeployments CPU-only deployments. Never
 * under a template's minimums, never over the node. Refused, before anything
 * is held, when the node could never hold it. Cores asked for are a hard cap;
 * a default is only the container's CPU weight (CPU_LIMITS).
 */
export function holdingFor(node: NodeSize, template: TemplateRow | undefined, asked: Asked): Holding {
  const gpuCount = asked.gpuCount ?? (template?.requiresGpu ? 1 : 0);
  if (gpuCount > node.gpuCount) {
    throw new ApiError("NODE_INSUFFICIENT_GPUS", `gpuCount ${gpuCount} is more than node ${node.id}'s ${node.gpuCount} GPUs`, {
      gpuCount: node.gpuCount,
    });
  }
  const nodeMillicores = node.cpuCores * MILLICORES_PER_CORE;
  if (asked.cpuCores !== undefined && Math.round(asked.cpuCores * MILLICORES_PER_CORE) > nodeMillicores) {
    throw new ApiError("NODE_INSUFFICIENT_CPU", `cpuCores ${asked.cpuCores} is more than node ${node.id}'s ${node.cpuCores} cores`, {
      cpuCores: node.cpuCores,
    });
  }
  // A tenth of the RAM stays for the host (usableRamMb): the agent gives no container more.
  const ramMb = usableRamMb(node.ramMb);
  if (asked.memoryMb !== undefined && asked.memoryMb > ramMb) {
    throw new ApiError("NODE_INSUFFICIENT_RAM", `memoryMb ${asked.memoryMb} is more than the ${ramMb} MB node ${node.id} has for deployments`, {
      usableRamMb: ramMb,
    });
  }
  // Fixed at creation, as the rate is: the node counts this figure until the deployment ends, whatever
  // default its agent says later. Unknown (a custom image on a node that never said its default): null, counted as 0.
  const diskGb = asked.diskGb ?? template?.minDiskGb ?? node.diskDefaultGb ?? null;
  const nodeDiskGb = node.specs.diskGb ?? 0;
  if (diskGb !== null && nodeDiskGb > 0 && diskGb > nodeDiskGb) {
    throw new ApiError("NODE_INSUFFICIENT_DISK", `a disk allowance of ${diskGb} GB is more than node ${node.id}'s ${nodeDiskGb} GB disk`, {
      diskGb: nodeDiskGb,
    });
  }
  const perSlot = (total: number) => Math.floor(total / Math.max(1, node.maxDeployments));
  const share = (total: number, cpuOnlyDefault: number) =>
    gpuCount > 0 ? Math.floor((total * gpuCount) / node.gpuCount) : Math.min(cpuOnlyDefault, perSlot(total));
  const cpuMillicores =
    asked.cpuCores !== undefined
      ? Math.round(asked.cpuCores * MILLICORES_PER_CORE)
      : Math.min(
          nodeMillicores,
          Math.max(share(nodeMillicores, CPU_ONLY_DEFAULT_CPU_CORES * MILLICORES_PER_CORE), (template?.minCpuCores ?? 0) * MILLICORES_PER_CORE),
        );
  const memoryMb = asked.memoryMb ?? Math.min(ramMb, Math.max(share(ramMb, CPU_ONLY_DEFAULT_MEMORY_MB), template?.minRamMb ?? 0));
  return {
    gpuCount,
    // A node that has not said its size (0 cores) holds nothing countable; else at least the floor Docker can run with.
    cpuMillicores: cpuMillicores > 0 ? Math.max(cpuMillicores, Math.min(nodeMillicores, MIN_CPU_CORES * MILLICORES_PER_CORE)) : 0,
    cpuLimit: asked.cpuCores !== undefined ? "quota" : "weight",
    memoryMb: memoryMb > 0 ? Math.max(memoryMb, Math.min(ramMb, MIN_MEMORY_MB)) : 0,
    diskGb,
  };
}

/** The node's hourlyRateCents is the price of one GPU-hour; a CPU-only deployment pays it once. */
export const hourlyRateFor = (node: Pick<NodeRow, "hourlyRateCents">, gpuCount: number) => node.hourlyRateCents * Math.max(1, gpuCount);
