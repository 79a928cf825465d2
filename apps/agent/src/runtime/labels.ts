// Every container and network the agent creates carries these labels: they are
// how it tells its own objects from the operator's and re-adopts them after a restart.

export const LABEL_MANAGED = "cm.managed";
export const LABEL_DEPLOYMENT_ID = "cm.deployment-id";
export const LABEL_NODE_ID = "cm.node-id";
export const LABEL_USER_ID = "cm.user-id";
/** "true" on the agent's sandbox containers (see sandboxes.ts): never a tenant's. */
export const LABEL_SANDBOX = "cm.sandbox";
/** On a tenant's container: the name of the sandbox whose network it joined. */
export const LABEL_SANDBOX_NAME = "cm.sandbox-name";
/** On a tenant's container: the ports the deployment exposes, "8080,9000" (Docker refuses ExposedPorts in a joined network). */
export const LABEL_PORTS = "cm.ports";
/** On a tenant's container: the ports a tunnel may reach as raw TCP (cm port-forward), "22,5432"; never probed as endpoints. */
export const LABEL_TCP_PORTS = "cm.tcp-ports";

/** A container's raw TCP ports, from its label. */
export function tcpPortsOf(labels: Record<string, string>): number[] {
  return (labels[LABEL_TCP_PORTS] ?? "")
    .split(",")
    .filter((port) => /^\d+$/.test(port))
    .map(Number);
}
/** On a tenant's container: its disk allowance in GB, what the disk watcher measures its writable layer against. */
export const LABEL_DISK_GB = "cm.disk-gb";

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

/**
 * The network agents before sandboxes made per deployment. Kept so an upgraded
 * agent still finds the address of, and cleans up after, containers made then.
 */
export function deploymentNetworkName(deploymentId: string): string {
  return `cm-${deploymentId}`;
}

/**
 * On everything the agent creates: the install it belongs to (install-identity.ts).
 * A machine enrolled again keeps its install, so the new node's agent knows what
 * the old node left; another agent on the same engine has another install.
 */
export const LABEL_INSTALL_ID = "cm.install-id";
