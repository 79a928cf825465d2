import type { DeploymentRow, StoredLogCursor } from "@cm/db";
import type { CommandAction, DeploymentSpec } from "@cm/protocol";

/** What the agent needs to know about a deployment's wanted state; equal keys need no new command. */
export const specKey = (d: Pick<DeploymentRow, "desiredState" | "runSeq">) => `${d.desiredState}:${d.runSeq}`;

/** What the agent must know of a deployment's template. */
export interface TemplateNeeds {
  requiresGpu: boolean;
  /** the deployment's disk allowance on the node */
  minDiskGb: number;
}

/**
 * GPUs a deployment gets on its node: a template says whether it needs them; a
 * custom image on a GPU node is rented for its GPUs, so it gets them all.
 */
export function gpuCountFor(d: Pick<DeploymentRow, "templateId">, nodeGpuCount: number, templates: ReadonlyMap<string, TemplateNeeds>): number {
  if (d.templateId === null) return nodeGpuCount;
  return templates.get(d.templateId)?.requiresGpu ? nodeGpuCount : 0;
}

/** The disk a deployment may write: its template's minDiskGb; none for a custom image, which gets the node's default. */
export function diskGbFor(d: Pick<DeploymentRow, "templateId">, templates: ReadonlyMap<string, TemplateNeeds>): number | undefined {
  return d.templateId === null ? undefined : templates.get(d.templateId)?.minDiskGb;
}

/** The disk allowance a tenant is shown: the template's, else the node's default as its agent told it; null before it has. */
export function diskAllowanceGb(
  d: Pick<DeploymentRow, "templateId">,
  templates: ReadonlyMap<string, TemplateNeeds>,
  nodeDiskDefaultGb: number | null | undefined,
): number | null {
  return diskGbFor(d, templates) ?? nodeDiskDefaultGb ?? null;
}

export function toSpec(d: DeploymentRow, cursor: StoredLogCursor | undefined, gpuCount: number, diskGb?: number): DeploymentSpec {
  return {
    deploymentId: d.id,
    userId: d.userId,
    runSeq: d.runSeq,
    desiredState: d.desiredState,
    image: d.image,
    // Only a deployment wanted running is (re)created from its spec; one being
    // stopped or removed is not, so its env is not sent again, however often.
    env: d.desiredState === "running" ? d.env : {},
    ports: d.ports,
    ...(d.desiredState === "running" && d.command ? { command: d.command } : {}),
    ...(d.desiredState === "running" && d.entrypoint ? { entrypoint: d.entrypoint } : {}),
    gpuCount,
    ...(diskGb !== undefined ? { diskGb } : {}),
    // The cursor lets a restarted agent resume shipping logs with neither loss nor duplicates.
    logCursor: cursor ?? { seq: 0, dockerTs: null },
  };
}

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
