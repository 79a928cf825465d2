// Containers a previous enrolment of this machine left (reconciler.ts removes them at sync).
import { dockerMessage } from "../runtime/errors";
import { LABEL_INSTALL_ID } from "../runtime/labels";
import type { ContainerState } from "../runtime/types";
import type { ReconcilerOptions } from "./reconciler-options";

/**
 * Made by this install (same state directory) for another node: this machine
 * was enrolled again, and no control plane wants the old node's containers.
 * Another node's container without our install id may be another agent's on
 * the same engine, or predate install ids: it is left alone.
 */
export function leftByPreviousEnrolment(container: ContainerState, installId: string | undefined, nodeId: string): boolean {
  return installId !== undefined && nodeId !== "" && container.labels[LABEL_INSTALL_ID] === installId;
}

export async function removeLeftOver(o: Pick<ReconcilerOptions, "runtime" | "logger" | "containerStopTimeoutS">, container: ContainerState): Promise<void> {
  o.logger.warn("Removing a container a previous enrolment of this machine left", {
    containerId: container.id,
    nodeId: container.nodeId,
    deploymentId: container.deploymentId,
  });
  try {
    if (container.running) await o.runtime.stop(container.id, o.containerStopTimeoutS);
    await o.runtime.remove(container.id);
  } catch (error) {
    o.logger.error("Could not remove a container a previous enrolment left", { containerId: container.id, error: dockerMessage(error) });
  }
}
