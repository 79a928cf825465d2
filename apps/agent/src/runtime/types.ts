// The agent's own vocabulary for containers. Docker's shapes are translated into
// these at the edge (create-options.ts, container-state.ts, log-lines.ts, ...).

import type { CpuLimit } from "@cm/protocol";

export interface ContainerSpec {
  deploymentId: string;
  nodeId: string;
  userId: string;
  image: string;
  env: Record<string, string>;
  /** overrides the image's CMD; the image's ENTRYPOINT still applies */
  cmd?: string[];
  /** overrides the image's ENTRYPOINT; [""] clears it */
  entrypoint?: string[];
  /** container ports (TCP) to publish on ephemeral host ports; see ContainerState.ports */
  exposedPorts: number[];
  /** container ports a tunnel may reach as raw TCP besides exposedPorts; stamped as a label, never probed */
  tcpPorts?: number[];
  /** fractional cores, e.g. 0.5: the container's CPU weight, and its hard cap unless cpuLimit is "weight" */
  cpuCores: number;
  /** "quota" when absent: cpuCores caps the container (NanoCpus); "weight": only weighs it against the others (CpuShares) */
  cpuLimit?: CpuLimit;
  memoryMb: number;
  /** the size of /dev/shm; Docker's 64 MB when absent */
  shmMb?: number;
  /** the deployment's disk allowance, stamped on the container for the disk watcher */
  diskGb?: number;
  /** nvidia-smi UUIDs ("GPU-...") or indexes ("0"); empty means no GPU */
  gpuDeviceIds: string[];
  /** extra labels (e.g. for tests); cannot override the cm.* labels */
  labels?: Record<string, string>;
  /** Docker container name; Docker picks one when absent */
  name?: string;
}

export interface PortMapping {
  containerPort: number;
  /** undefined until the container runs and Docker assigns a host port */
  hostPort?: number;
}

export interface ContainerState {
  id: string;
  name: string;
  deploymentId: string;
  nodeId: string;
  userId: string;
  image: string;
  /** every label, the cm.* ones included: what the agent rebuilds its state from after a restart */
  labels: Record<string, string>;
  /** Docker's status: "created", "running", "paused", "restarting", "exited", "dead", "removing" */
  status: string;
  running: boolean;
  /** null until the container has exited at least once */
  exitCode: number | null;
  /** ISO 8601; null when never started */
  startedAt: string | null;
  /** ISO 8601; null while running or never started */
  finishedAt: string | null;
  oomKilled: boolean;
  /** Docker's error, e.g. why it could not start; "" when none */
  error: string;
  /** address on the deployment's own network; null when not attached/running */
  ipAddress: string | null;
  ports: PortMapping[];
  /** the json-file log on the engine's host; null for other log drivers */
  logPath: string | null;
}

export interface ContainerExit {
  id: string;
  exitCode: number;
  oomKilled: boolean;
  error: string;
}

export interface PullProgress {
  layersDone: number;
  layersTotal: number;
  /** present once Docker has told the size of at least one layer */
  bytesDone?: number;
  bytesTotal?: number;
}

export interface LogLine {
  /** ISO 8601 with millisecond precision, for sorting and display */
  timestamp: string;
  /** Docker's RFC 3339 timestamp as given, nanoseconds included, e.g. for a precise `since` */
  dockerTimestamp: string;
  stream: "stdout" | "stderr";
  /** the line without its timestamp and line ending */
  message: string;
}

export interface LogOptions {
  since?: Date;
  /** only the last n lines (of stdout and stderr together); Docker reads them from the end of the file */
  tail?: number;
  follow: boolean;
}

export interface LogStreamHandle {
  /** Stops following; lines already buffered are flushed first. */
  stop(): void;
  /** Settles when the stream has ended (container stopped, or stop() called). */
  done: Promise<void>;
}

export interface EngineInfo {
  version: string;
  /** Docker's data root (DockerRootDir), where images and container layers live */
  dataRoot: string;
  /** names of the OCI runtimes Docker knows (`docker info` Runtimes), e.g. ["io.containerd.runc.v2", "nvidia", "runc"] */
  runtimes: string[];
  /** the engine's machine (uname -m), e.g. "x86_64", "aarch64" */
  architecture: string;
}
