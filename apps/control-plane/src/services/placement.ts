// Which node a deployment without a nodeId goes to, and why none does: the
// cheapest online node that fits, and otherwise each online node's first
// reason not to, counted, so a tenant knows which requirement to relax.
import { type NodeRow, nodeFree, type OccupyRefusal } from "@cm/db";
import { type CreateDeploymentRequest, MILLICORES_PER_CORE, PLACEMENT_MAX_TRIES } from "@cm/protocol";
import { ApiError } from "../errors";
import type { Holding } from "./deployment-resources";

/** A placement requirement of the create body (the catalogue's filter names), or the code creating on that node would answer. */
export type PlacementReason = "region" | "maxHourlyRate" | "gpuModel" | "minGpuVram" | "untried" | ApiError["code"];
export type Requirements = Pick<CreateDeploymentRequest, "region" | "maxHourlyRate" | "gpuModel" | "minGpuVram" | "gpuCount">;

/** The first placement requirement the node does not meet; checked first, as GET /nodes filters. */
export function unmetRequirement(node: NodeRow, r: Requirements): PlacementReason | undefined {
  if (r.region !== undefined && node.region !== r.region) return "region";
  // As the catalogue's maxHourlyRate: the node's per-GPU rate, whole credits.
  if (r.maxHourlyRate !== undefined && node.hourlyRateCents > Math.floor(r.maxHourlyRate)) return "maxHourlyRate";
  if (r.gpuModel !== undefined) {
    const model = r.gpuModel.toLowerCase();
    if (!node.gpus.some((g) => g.name.toLowerCase().includes(model))) return "gpuModel";
  }
  if (r.minGpuVram !== undefined && node.maxGpuVramMb < r.minGpuVram) return "minGpuVram";
  return undefined;
}

/**
 * Whether the node has room for the holding now, as the conditional UPDATE
 * that takes it checks (repos.deployments.occupy): the code it would refuse
 * with, else undefined. Advice only: the UPDATE decides.
 */
export function refusalNow(node: NodeRow, h: Holding): OccupyRefusal | undefined {
  const free = nodeFree(node);
  if (node.activeDeployments >= node.maxDeployments) return "NODE_AT_CAPACITY";
  if (h.gpuCount > 0 && h.gpuCount > free.freeGpus) return "NODE_INSUFFICIENT_FREE_GPUS";
  if (h.cpuMillicores > 0 && h.cpuMillicores > Math.round(free.freeCpuCores * MILLICORES_PER_CORE)) return "NODE_INSUFFICIENT_FREE_CPU";
  if (h.memoryMb > 0 && h.memoryMb > free.freeMemoryMb) return "NODE_INSUFFICIENT_FREE_RAM";
  if ((h.diskGb ?? 0) > 0 && (node.specs.diskGb ?? 0) > 0 && (h.diskGb ?? 0) > free.freeDiskGb) return "NODE_INSUFFICIENT_FREE_DISK";
  return undefined;
}

export type Candidate = { node: NodeRow; holding: Holding; hourlyRateCents: number };

/** Cheapest first; of equal rates the node with most free GPUs (leaving the fuller ones whole), then by id so the answer is the same each time. */
export const byPreference = (a: Candidate, b: Candidate) =>
  a.hourlyRateCents - b.hourlyRateCents ||
  nodeFree(b.node).freeGpus - nodeFree(a.node).freeGpus ||
  (a.node.id < b.node.id ? -1 : a.node.id > b.node.id ? 1 : 0);

const verb = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;
const gpus = (n: number) => `${n} free GPU${n === 1 ? "" : "s"}`;

/** How each reason reads after its count, in the tenant's terms. */
function phrase(reason: PlacementReason, n: number, r: Requirements): string {
  switch (reason) {
    case "region":
      return verb(n, "is in another region", "are in another region");
    case "maxHourlyRate":
      return verb(n, "is over your maximum rate", "are over your maximum rate");
    case "gpuModel":
      return verb(n, `has no ${r.gpuModel} GPU`, `have no ${r.gpuModel} GPU`);
    case "minGpuVram":
      return verb(n, `lacks a GPU with ${r.minGpuVram} MB`, `lack a GPU with ${r.minGpuVram} MB`);
    case "NODE_NO_GPU":
      return verb(n, "has no GPU (the template needs one)", "have no GPU (the template needs one)");
    case "NODE_INSUFFICIENT_GPU_VRAM":
      return verb(n, "has GPUs too small for the template", "have GPUs too small for the template");
    case "NODE_INSUFFICIENT_GPUS":
      return verb(n, `has fewer than ${r.gpuCount} GPUs`, `have fewer than ${r.gpuCount} GPUs`);
    case "NODE_INSUFFICIENT_CPU":
      return verb(n, "has fewer CPU cores than it needs", "have fewer CPU cores than it needs");
    case "NODE_INSUFFICIENT_RAM":
      return verb(n, "has less memory than it needs", "have less memory than it needs");
    case "NODE_INSUFFICIENT_FREE_GPUS":
      return verb(n, `lacks ${gpus(r.gpuCount ?? 1)}`, `lack ${gpus(r.gpuCount ?? 1)}`);
    case "NODE_INSUFFICIENT_FREE_CPU":
      return verb(n, "lacks the free CPU cores it needs", "lack the free CPU cores it needs");
    case "NODE_INSUFFICIENT_FREE_RAM":
      return verb(n, "lacks the free memory it needs", "lack the free memory it needs");
    case "NODE_INSUFFICIENT_DISK":
      return verb(n, "has a smaller disk than it needs", "have a smaller disk than it needs");
    case "NODE_INSUFFICIENT_FREE_DISK":
      return verb(n, "lacks the free disk it needs", "lack the free disk it needs");
    case "NODE_AT_CAPACITY":
      return verb(n, "already runs its maxDeployments", "already run their maxDeployments");
    case "IMAGE_HAS_NO_COMMAND":
      return verb(n, "holds the image with no command (give one)", "hold the image with no command (give one)");
    case "NODE_IN_MAINTENANCE":
      return verb(n, "is in maintenance", "are in maintenance");
    case "NODE_OFFLINE":
      return verb(n, "went offline meanwhile", "went offline meanwhile");
    case "untried":
      return verb(
        n,
        `was not tried after ${PLACEMENT_MAX_TRIES} were taken meanwhile (try again)`,
        `were not tried after ${PLACEMENT_MAX_TRIES} were taken meanwhile (try again)`,
      );
    default:
      return verb(n, `refused it (${reason})`, `refused it (${reason})`);
  }
}

/** NO_NODE_FITS, its message counting the online nodes per reason, most common first. */
export function noNodeFits(online: number, reasons: ReadonlyMap<PlacementReason, number>, r: Requirements): ApiError {
  // Most common first; equal counts by name, so the same nodes always read the same.
  const counted = [...reasons].sort(([ra, a], [rb, b]) => b - a || (ra < rb ? -1 : ra > rb ? 1 : 0));
  const message =
    online === 0
      ? "no node fits: no node is online"
      : `no node fits: ${verb(online, "node", "nodes")} online: ${counted.map(([reason, n]) => phrase(reason, n, r)).join(", ")}`;
  return new ApiError("NO_NODE_FITS", message, { online, reasons: Object.fromEntries(counted) });
}
