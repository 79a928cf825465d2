// What a sandbox pool is told and the constants it keeps (sandboxes.ts).
import type { ContainerEnds } from "./docker-engine-events";

/** Whose containers a sandbox is for: the node, and the agent's extra container labels. */
export interface SandboxOwner {
  nodeId: string;
  labels: Record<string, string>;
  /** the agent's install (install-identity.ts): stamped on sandboxes, and how those of its earlier nodes are known */
  installId?: string;
}

/** How many ready sandboxes an agent keeps by default: a pair covers two deploys in a row. */
export const DEFAULT_SANDBOX_POOL = 2;
/**
 * How often the pool looks at every sandbox of its node on the engine even when no event came
 * (the event stream was reconnecting, or a reboot): containers' ends make it look at once.
 */
export const DEFAULT_SPARE_CHECK_INTERVAL_MS = 15_000;

export interface SandboxPoolOptions {
  spareCheckIntervalMs?: number;
  /** containers' ends and the engine's comebacks (docker-engine-events.ts): what makes the pool look again at once */
  events?: ContainerEnds;
  /** DEFAULT_MAKING_GRACE_MS */
  makingGraceMs?: number;
  /** DEFAULT_BRIDGE_PREFIX: what the egress policy's firewall rules match a deployment's bridge by */
  bridgePrefix?: string;
}
/** Refilling waits this long after a take, so it never competes with the start it made fast. */
export const REFILL_DELAY_MS = 1_000;
/**
 * A sandbox made but not running yet, or a network without its sandbox, this
 * young is being made by another pool on the engine (the previous agent of the
 * node finishing a deploy, another agent): its maker starts it, and no one else
 * may take or remove it meanwhile. Older, its maker died between the two steps.
 */
export const DEFAULT_MAKING_GRACE_MS = 60_000;
export const NOT_FOUND = 404;
export const CONFLICT = 409; // its removal is already in progress

/** How long a removal someone else began (`docker rm -f`) is waited for before giving up on it. */
export const REMOVAL_WAIT_MS = 30_000;
