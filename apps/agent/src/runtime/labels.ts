// Every container and network the agent creates carries these labels: they are
// how it tells its own objects from the operator's and re-adopts them after a restart.

export const LABEL_MANAGED = "cm.managed";
export const LABEL_DEPLOYMENT_ID = "cm.deployment-id";
export const LABEL_NODE_ID = "cm.node-id";
export const LABEL_USER_ID = "cm.user-id";

export interface LabelOwners {
  deploymentId: string;
  nodeId: string;
  userId: string;
}

/** Extra labels go first so a caller can never overwrite the cm.* ones. */
export function managedLabels(owners: LabelOwners, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...extra,
    [LABEL_MANAGED]: "true",
    [LABEL_DEPLOYMENT_ID]: owners.deploymentId,
    [LABEL_NODE_ID]: owners.nodeId,
    [LABEL_USER_ID]: owners.userId,
  };
}

/** Docker API `filters` value selecting managed objects (optionally narrowed by more labels). */
export function managedLabelFilter(extra: Record<string, string> = {}): { label: string[] } {
  const pairs = { [LABEL_MANAGED]: "true", ...extra };
  return { label: Object.entries(pairs).map(([key, value]) => `${key}=${value}`) };
}

/** One bridge network per deployment isolates tenants from each other. */
export function deploymentNetworkName(deploymentId: string): string {
  return `cm-${deploymentId}`;
}
