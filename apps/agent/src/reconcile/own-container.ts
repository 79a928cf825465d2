// Which container a tenant's exec session or endpoint connection may enter: the
// running one this agent made for that deployment, as this node. Several agents
// (two enrolments, a test run beside a real one) can share one Docker engine, and
// the deployment label alone would let one of them enter another's container.
import type { ContainerRuntime } from "../runtime/container-runtime";
import { LABEL_DEPLOYMENT_ID } from "../runtime/labels";
import type { ContainerState } from "../runtime/types";

export interface ContainerOwner {
  /** the agent's own labels (AGENT_CONTAINER_LABELS), on every container it makes */
  labels: Record<string, string>;
  /** the node this agent is now; "" before the first welcome, when nothing is entered */
  nodeId: string;
}

export async function ownRunningContainer(runtime: ContainerRuntime, owner: ContainerOwner, deploymentId: string): Promise<ContainerState | undefined> {
  if (!owner.nodeId) return undefined;
  const listed = await runtime.listManaged({ ...owner.labels, [LABEL_DEPLOYMENT_ID]: deploymentId });
  return listed.find((c) => c.running && c.deploymentId === deploymentId && c.nodeId === owner.nodeId);
}
