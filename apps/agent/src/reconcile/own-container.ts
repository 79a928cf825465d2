// Which container a tenant's exec session or endpoint connection may enter (the
// running one this agent made for that deployment, as this node), and which one a
// tenant's copy reads (that container, running or not). Several agents
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
  return (await ownContainers(runtime, owner, deploymentId)).find((c) => c.running);
}

/**
 * This node's container of the deployment whatever its state: a stopped, exited
 * or lost deployment's container keeps its files until it is removed, and a
 * tenant may copy them out (cm cp). The running one first, else the last started.
 */
export async function ownContainer(runtime: ContainerRuntime, owner: ContainerOwner, deploymentId: string): Promise<ContainerState | undefined> {
  const listed = await ownContainers(runtime, owner, deploymentId);
  const startedMs = (c: ContainerState) => (c.startedAt ? Date.parse(c.startedAt) : 0);
  return listed.find((c) => c.running) ?? listed.sort((a, b) => startedMs(b) - startedMs(a))[0];
}

async function ownContainers(runtime: ContainerRuntime, owner: ContainerOwner, deploymentId: string): Promise<ContainerState[]> {
  if (!owner.nodeId) return [];
  const listed = await runtime.listManaged({ ...owner.labels, [LABEL_DEPLOYMENT_ID]: deploymentId });
  return listed.filter((c) => c.deploymentId === deploymentId && c.nodeId === owner.nodeId);
}
