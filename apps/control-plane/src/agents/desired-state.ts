import type { DeploymentRow, StoredLogCursor } from "@cm/db";
import { type CommandAction, type DeploymentSpec, MILLICORES_PER_CORE, type RegistryAuth, restartDelayMs } from "@cm/protocol";
import { NODE_LOST_PREFIX } from "../services/metering";

/** What the agent needs to know about a deployment's wanted state; equal keys need no new command. */
export const specKey = (d: Pick<DeploymentRow, "desiredState" | "runSeq">) => `${d.desiredState}:${d.runSeq}`;

/** What the agent must know of a deployment's template. */
export interface TemplateNeeds {
  requiresGpu: boolean;
  /** the deployment's disk allowance on the node */
  minDiskGb: number;
}

/** The disk a deployment may write: what it asked for, else its template's minDiskGb; none for a custom image, which gets the node's default. */
export function diskGbFor(d: Pick<DeploymentRow, "templateId" | "diskGb">, templates: ReadonlyMap<string, TemplateNeeds>): number | undefined {
  if (d.diskGb !== null) return d.diskGb;
  return d.templateId === null ? undefined : templates.get(d.templateId)?.minDiskGb;
}

/** The disk allowance a tenant is shown: the template's, else the node's default as its agent told it; null before it has. */
export function diskAllowanceGb(
  d: Pick<DeploymentRow, "templateId" | "diskGb">,
  templates: ReadonlyMap<string, TemplateNeeds>,
  nodeDiskDefaultGb: number | null | undefined,
): number | null {
  return diskGbFor(d, templates) ?? nodeDiskDefaultGb ?? null;
}

export function toSpec(d: DeploymentRow, cursor: StoredLogCursor | undefined, diskGb?: number, registryAuth?: RegistryAuth): DeploymentSpec {
  return {
    deploymentId: d.id,
    userId: d.userId,
    runSeq: d.runSeq,
    // A run the restart policy began waits its backoff on the node; a tenant's start (restartCount 0) does not.
    ...(d.desiredState === "running" && d.restartCount > 0 ? { startDelayMs: restartDelayMs(d.restartCount) } : {}),
    desiredState: d.desiredState,
    image: d.image,
    // Only a deployment wanted running is (re)created from its spec; one being
    // stopped or removed is not, so its env is not sent again, however often.
    env: d.desiredState === "running" ? d.env : {},
    ports: d.ports,
    // Sent only when there are some: an agent older than them parses no field it does not know of.
    ...(d.tcpPorts.length > 0 ? { tcpPorts: d.tcpPorts } : {}),
    ...(d.desiredState === "running" && d.command ? { command: d.command } : {}),
    ...(d.desiredState === "running" && d.entrypoint ? { entrypoint: d.entrypoint } : {}),
    // What it holds of the node, the agent enforces: its GPUs whole, and Docker's CPU and memory limits.
    // 0: a deployment older than counted resources, which gets the agent's fair share.
    // Such rows (live across migration 0007) are not backfilled: they keep their slot, so
    // maxDeployments still bounds the node; the agent never gives one GPU to two containers
    // (pickFreeGpus reads the running ones' labels), so a deployment the counters over-admit
    // fails on the node saying so; and vacate gives back the 0 they took. What each was given
    // under the old whole-machine rule is on its container, not in the database, so a backfill
    // would be a guess. Left as is: started again after a stop, such a deployment runs without GPUs.
    gpuCount: d.gpuCount,
    ...(d.cpuMillicores > 0 ? { cpuCores: d.cpuMillicores / MILLICORES_PER_CORE } : {}),
    // A default's cores are its weight alone; an agent older than cpuLimit caps them, as it always did.
    ...(d.cpuLimit === "weight" ? { cpuLimit: d.cpuLimit } : {}),
    ...(d.memoryMb > 0 ? { memoryMb: d.memoryMb } : {}),
    ...(diskGb !== undefined ? { diskGb } : {}),
    ...(d.desiredState === "running" && d.status === "running" ? { started: true as const } : {}),
    // The cursor lets a restarted agent resume shipping logs with neither loss nor duplicates.
    logCursor: cursor ?? { seq: 0, dockerTs: null },
    ...(registryAuth && needsPull(d) ? { registryAuth } : {}),
  };
}

/**
 * Until when a lost node's returning agent keeps the stopped container of a
 * deployment that ended with it (LOST_RETENTION_S after the loss): the tenant's
 * files are there meanwhile, and an operator's disk is not held for ever.
 */
export const lostRetention = (d: Pick<DeploymentRow, "desiredState" | "status" | "statusReason" | "stoppedAt">, retentionMs: number) =>
  d.desiredState === "stopped" && d.status === "failed" && d.stoppedAt !== null && d.statusReason?.startsWith(NODE_LOST_PREFIX)
    ? { removeAfter: d.stoppedAt + retentionMs }
    : {};

/**
 * Whether the agent may have to pull the deployment's image for this spec: it is
 * wanted running and has not started yet (a create or start command, or the sync
 * that replays one after a reconnect). Only then does its registry login go out.
 */
export const needsPull = (d: Pick<DeploymentRow, "desiredState" | "status" | "registryCredentialId">) =>
  d.registryCredentialId !== null && d.desiredState === "running" && (d.status === "pending" || d.status === "pulling" || d.status === "starting");

/** The command that tells an agent about a change; `seenBefore`: the agent was already told of this deployment. */
export function commandAction(d: Pick<DeploymentRow, "desiredState">, seenBefore: boolean): CommandAction {
  if (d.desiredState === "removed") return "remove";
  if (d.desiredState === "stopped") return "stop";
  return seenBefore ? "start" : "create";
}

/** What one sync part may weigh besides its deployments: the frame's own fields. */
const SYNC_PART_OVERHEAD_BYTES = 64;

/**
 * The node's desired state cut into parts of about `partBytes` each, in order;
 * always at least one part (an empty sync still says "nothing"). A spec larger
 * than a part goes alone in one. A spec larger than `maxBytes`, what the agent
 * reads, is left out and returned in `tooBig`: sending it would make the agent
 * close its connection, again at every reconnect.
 */
export function syncParts(specs: readonly DeploymentSpec[], partBytes: number, maxBytes: number): { parts: DeploymentSpec[][]; tooBig: DeploymentSpec[] } {
  const parts: DeploymentSpec[][] = [[]];
  const tooBig: DeploymentSpec[] = [];
  let used = SYNC_PART_OVERHEAD_BYTES;
  for (const spec of specs) {
    const bytes = Buffer.byteLength(JSON.stringify(spec)) + 1; // and its comma
    if (bytes + SYNC_PART_OVERHEAD_BYTES > maxBytes) {
      tooBig.push(spec);
      continue;
    }
    if (used + bytes > partBytes && parts[parts.length - 1]!.length > 0) {
      parts.push([]);
      used = SYNC_PART_OVERHEAD_BYTES;
    }
    parts[parts.length - 1]!.push(spec);
    used += bytes;
  }
  return { parts, tooBig };
}
