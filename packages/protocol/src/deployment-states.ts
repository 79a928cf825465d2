import type { DeploymentStatus } from "./api/deployments";

/**
 * The deployment state machine, shared by the API (which refuses invalid actions
 * with 409) and the agent session (which reports what really happened).
 *
 *   pending   accepted; waiting for the node's agent to take it
 *   pulling   the node is downloading the image
 *   starting  the container is being created and started
 *   running   the container runs; usage is charged every minute
 *   stopping  a stop was asked; the container is being stopped
 *   stopped   stopped by the tenant, or by us (credits ran out): statusReason says which
 *   exited    the container ended by itself, whatever its exitCode (a restart policy decides what follows)
 *   failed    it could not start (image missing), its node was lost or retired, or the node ended it: statusReason says why
 */
export const TENANT_ACTIONS = {
  start: ["stopped", "exited", "failed"],
  // Stopping something that has not reached running yet is what a tenant expects
  // when a pull is slow or a start hangs, so it is allowed from every live state.
  stop: ["pending", "pulling", "starting", "running"],
} as const satisfies Record<string, readonly DeploymentStatus[]>;

export type TenantAction = keyof typeof TENANT_ACTIONS;

export function canDo(action: TenantAction, status: DeploymentStatus): boolean {
  return (TENANT_ACTIONS[action] as readonly DeploymentStatus[]).includes(status);
}

/** States in which a deployment occupies a slot on its node and is billed or about to be. */
export const LIVE_STATUSES = ["pending", "pulling", "starting", "running", "stopping"] as const satisfies readonly DeploymentStatus[];
export const isLive = (s: DeploymentStatus) => (LIVE_STATUSES as readonly DeploymentStatus[]).includes(s);
