// What the network sandbox pool (sandboxes.ts) asks of the container engine, in
// the pool's own terms: the pool decides which sandboxes to make, keep, hand out
// and remove; an engine only does it. DockerSandboxEngine is the one real
// implementation; the pool's tests run on an in-memory one.

/** A sandbox container as the engine lists it. */
export interface SandboxHolder {
  name: string;
  /** the engine's word for it: "created" (made, not started yet), "running", "exited", ... */
  state: string;
  createdMs: number;
  labels: Record<string, string>;
}

/** A sandbox's bridge network as the engine lists it; named as its sandbox. */
export interface SandboxNetwork {
  name: string;
  createdMs: number;
  labels: Record<string, string>;
  /** the bridge's interface name on the host, what the egress policy's rules match */
  bridge: string | undefined;
}

/** A container in a sandbox's namespace (a tenant's). */
export interface SandboxUser {
  sandbox: string;
  /** as SandboxHolder.state */
  state: string;
}

/** What create() asks for. */
export interface NewSandbox {
  name: string;
  /** stamped on the sandbox and its network */
  labels: Record<string, string>;
  /** DEFAULT_BRIDGE_PREFIX when not given */
  bridgePrefix?: string | undefined;
}

export interface SandboxEngine {
  /** Sandbox containers (running or not) carrying every one of `labels`. */
  listSandboxes(labels: Record<string, string>): Promise<SandboxHolder[]>;
  /** Sandbox networks carrying every one of `labels`. */
  listNetworks(labels: Record<string, string>): Promise<SandboxNetwork[]>;
  /** Every container that joined a sandbox, whichever node's or state. */
  listUsers(): Promise<SandboxUser[]>;
  /** What making a sandbox needs first (Docker: the sandbox image, made once); rejects when the engine cannot run sandboxes at all. */
  prepare(): Promise<void>;
  /**
   * Makes the network and the sandbox holding it, and starts it. A failure may
   * leave either behind: the caller removes them. Rejects with
   * SandboxVanishedError when something it needed went meanwhile.
   */
  create(sandbox: NewSandbox): Promise<void>;
  /** Removes the sandbox container; settles once it is gone (already gone is not an error). */
  removeContainer(name: string): Promise<void>;
  /** Removes the sandbox's network; already gone is not an error, in use is. */
  removeNetwork(name: string): Promise<void>;
  /** Whether the sandbox runs; false when it is gone. */
  running(name: string): Promise<boolean>;
  /** The running sandbox's address on its network; null when it is not running or gone. */
  address(name: string): Promise<string | null>;
}

/**
 * create() found something it needed gone (an operator pruned the sandbox image,
 * or removed the sandbox before its start): made again, it may well work. The
 * message is the engine's own.
 */
export class SandboxVanishedError extends Error {
  override readonly name = "SandboxVanishedError";
}
