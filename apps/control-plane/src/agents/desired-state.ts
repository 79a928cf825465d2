import type { DeploymentRow, StoredLogCursor } from "@cm/db";
import type { CommandAction, DeploymentSpec } from "@cm/protocol";

/** What the agent needs to know about a deployment's wanted state; equal keys need no new command. */
export const specKey = (d: Pick<DeploymentRow, "desiredState" | "runSeq">) => `${d.desiredState}:${d.runSeq}`;

/**
 * GPUs a deployment gets on its node: a template says whether it needs them; a
 * custom image on a GPU node is rented for its GPUs, so it gets them all.
 */
export function gpuCountFor(d: Pick<DeploymentRow, "templateId">, nodeGpuCount: number, templateNeedsGpu: ReadonlyMap<string, boolean>): number {
  if (d.templateId === null) return nodeGpuCount;
  return templateNeedsGpu.get(d.templateId) ? nodeGpuCount : 0;
}

export function toSpec(d: DeploymentRow, cursor: StoredLogCursor | undefined, gpuCount: number): DeploymentSpec {
  return {
    deploymentId: d.id,
    userId: d.userId,
    runSeq: d.runSeq,
    desiredState: d.desiredState,
    image: d.image,
    env: d.env,
    ports: d.ports,
    gpuCount,
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
