// Pure builders of what we ask Docker to create. Every tenant container gets the
// same hardened HostConfig; only limits, ports and GPUs vary with the spec.
import type Docker from "dockerode";
import { LABEL_DISK_GB, LABEL_PORTS, LABEL_SANDBOX, LABEL_SANDBOX_NAME, LABEL_TCP_PORTS, managedLabels } from "./labels";
import type { ContainerSpec } from "./types";

/**
 * Docker's default set minus what ordinary images do not need: AUDIT_WRITE,
 * MKNOD, NET_RAW (raw sockets: ARP/ICMP spoofing on the bridge), SETFCAP,
 * SETPCAP and SYS_CHROOT are dropped. What stays lets images chown their files
 * at start-up (CHOWN, DAC_OVERRIDE, FOWNER, FSETID), drop root for a service
 * user (SETUID, SETGID, e.g. gosu/su-exec in postgres or redis entrypoints),
 * bind ports below 1024 (NET_BIND_SERVICE, e.g. nginx on 80) and signal their
 * own children (KILL).
 */
export const CONTAINER_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETGID", "SETUID", "NET_BIND_SERVICE", "KILL"] as const;

/** Stops fork bombs; generous for dataloader workers and web servers. */
export const CONTAINER_PIDS_LIMIT = 1024;

/** json-file with rotation: at most 30 MB of logs per container on the operator's disk. */
export const CONTAINER_LOG_CONFIG = { Type: "json-file", Config: { "max-size": "10m", "max-file": "3" } };

/**
 * Open files per process, soft and hard alike: enough for databases and busy
 * servers, and never the daemon's own (often a million), which a tenant could
 * spend on the host's file table. It must stay at or below the daemon's own hard
 * limit: the container's init cannot raise it (measured: dockerd at 20,000 on a
 * Debian VM refuses to start a container asking 65,536, "error setting rlimit
 * type 7"), and systemd's default for services is 524,288.
 */
export const CONTAINER_NOFILE = 16_384;

/**
 * Every deployment's bridge is named with this prefix (Docker's own names are
 * br-<id>), so the egress policy's firewall rules match all of them with one
 * `-i cm-+` and never change as deployments come and go.
 */
export const DEFAULT_BRIDGE_PREFIX = "cm-";
/** Linux's limit on an interface name (IFNAMSIZ less the NUL). */
const INTERFACE_NAME_MAX = 15;

const NANO_CPUS_PER_CORE = 1_000_000_000;
/** Docker's weight of a container that names none is 1,024: one core's worth. The kernel takes 2 to 262,144. */
const CPU_SHARES_PER_CORE = 1024;
const MIN_CPU_SHARES = 2;
const MAX_CPU_SHARES = 262_144;

/** A container's CPU weight in proportion to its cores: under contention each gets its cores' share of the node. */
export const cpuShares = (cpuCores: number) => Math.min(MAX_CPU_SHARES, Math.max(MIN_CPU_SHARES, Math.round(cpuCores * CPU_SHARES_PER_CORE)));
const BYTES_PER_MB = 1024 * 1024;
/** Decimal, as tenants read "GB" and as the disk watcher measures (disk/disk-watcher.ts). */
const BYTES_PER_GB = 1_000_000_000;

/**
 * Whether Docker can cap a container's writable layer (`--storage-opt size=`):
 * overlay2 on xfs only, and then only when xfs is mounted with pquota, which
 * `docker info` does not tell, so a create may still refuse (see
 * docker-container-client.ts).
 */
export function mayCapWritableLayers(info: { Driver?: string; DriverStatus?: Array<[string, string]> }): boolean {
  return info.Driver === "overlay2" && (info.DriverStatus ?? []).some(([key, value]) => key === "Backing Filesystem" && value === "xfs");
}

/**
 * Options for `docker.createContainer`. A cpuCores or memoryMb of 0 means "no
 * limit". cpuCores weigh the container against the others (CpuShares) and, unless
 * cpuLimit is "weight", cap it (NanoCpus): a default is not capped, since a
 * quota of a node's share per slot (0.04 cores) slowed runc's own start 2-2.5x
 * (see CPU_LIMITS). No Binds, Mounts or Volumes are ever set: tenants see
 * nothing of the host's filesystem, and never the Docker socket.
 *
 * The container joins the network namespace of `sandbox`, a container holding
 * the deployment's own bridge network (sandboxes.ts): it gets that network's
 * address, DNS and hostname, and starts without waiting for a network to be set up.
 */
export function buildContainerCreateOptions(spec: ContainerSpec, sandbox: string, engine: { capsWritableLayer?: boolean } = {}): Docker.ContainerCreateOptions {
  const hostConfig: Docker.HostConfig = {
    Privileged: false,
    CapDrop: ["ALL"],
    CapAdd: [...CONTAINER_CAPABILITIES],
    // Docker's default seccomp profile applies because nothing here names another.
    SecurityOpt: ["no-new-privileges"],
    PidsLimit: CONTAINER_PIDS_LIMIT,
    Ulimits: [{ Name: "nofile", Soft: CONTAINER_NOFILE, Hard: CONTAINER_NOFILE }],
    // Its own IPC namespace, whatever the daemon's default-ipc-mode says; PID and UTS are private unless asked otherwise, and never are.
    IpcMode: "private",
    // tini as PID 1 reaps zombies and forwards SIGTERM, so `stop` is graceful for any image.
    Init: true,
    LogConfig: CONTAINER_LOG_CONFIG,
    NetworkMode: `container:${sandbox}`,
    // No host ports: a tenant's port is reached only through the control plane's
    // tunnel to the container's address on its own network, never from outside.
    // The agent restarts (or not) deployments itself; Docker must not race it.
    RestartPolicy: { Name: "no" },
  };
  if (spec.cpuCores > 0) {
    hostConfig.CpuShares = cpuShares(spec.cpuCores);
    if (spec.cpuLimit !== "weight") hostConfig.NanoCpus = Math.round(spec.cpuCores * NANO_CPUS_PER_CORE);
  }
  if (spec.memoryMb > 0) {
    hostConfig.Memory = spec.memoryMb * BYTES_PER_MB;
    // Same as Memory: no swap on top of the limit, so the limit is what the tenant paid for.
    hostConfig.MemorySwap = spec.memoryMb * BYTES_PER_MB;
  }
  // tmpfs pages count against the memory limit; the size only bounds how much of it /dev/shm may take.
  if (spec.shmMb !== undefined && spec.shmMb > 0) hostConfig.ShmSize = spec.shmMb * BYTES_PER_MB;
  // Where the engine can (overlay2 on xfs with project quotas) the writable layer is capped outright; elsewhere the disk watcher measures it.
  if (engine.capsWritableLayer && spec.diskGb !== undefined && spec.diskGb > 0)
    hostConfig.StorageOpt = { size: String(Math.round(spec.diskGb * BYTES_PER_GB)) };
  if (spec.gpuDeviceIds.length > 0) {
    hostConfig.DeviceRequests = [{ Driver: "nvidia", DeviceIDs: [...spec.gpuDeviceIds], Capabilities: [["gpu"]] }];
  }

  return {
    ...(spec.name ? { name: spec.name } : {}),
    Image: spec.image,
    Env: Object.entries(spec.env).map(([key, value]) => `${key}=${value}`),
    ...(spec.cmd ? { Cmd: [...spec.cmd] } : {}),
    ...(spec.entrypoint ? { Entrypoint: [...spec.entrypoint] } : {}),
    Labels: {
      ...managedLabels(spec, spec.labels),
      [LABEL_SANDBOX_NAME]: sandbox,
      [LABEL_PORTS]: spec.exposedPorts.join(","),
      ...(spec.tcpPorts?.length ? { [LABEL_TCP_PORTS]: spec.tcpPorts.join(",") } : {}),
      ...(spec.diskGb !== undefined ? { [LABEL_DISK_GB]: String(spec.diskGb) } : {}),
    },
    Tty: false,
    OpenStdin: false,
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    HostConfig: hostConfig,
  };
}

/** A sandbox's own bridge network: tenants on one node cannot reach each other. */
export function buildSandboxNetworkOptions(name: string, labels: Record<string, string>, bridgePrefix = DEFAULT_BRIDGE_PREFIX): Docker.NetworkCreateOptions {
  return {
    Name: name,
    Driver: "bridge",
    CheckDuplicate: true,
    Labels: { ...labels, [LABEL_SANDBOX]: "true" },
    Options: { [BRIDGE_NAME_OPTION]: bridgeName(name, bridgePrefix) },
  };
}

export const BRIDGE_NAME_OPTION = "com.docker.network.bridge.name";

/** cm-sbx-0123456789ab -> cm-0123456789ab: the sandbox's random part after the prefix, cut to an interface name's length. */
export function bridgeName(sandbox: string, prefix = DEFAULT_BRIDGE_PREFIX): string {
  return `${prefix}${sandbox.replace(/^cm-sbx-/, "")}`.slice(0, INTERFACE_NAME_MAX);
}

/**
 * The sandbox container: runs the pause program (sandbox-program.ts) and
 * nothing else, as nobody, with no capabilities and a read-only root, so
 * holding a tenant's network is all it can ever do.
 */
export function buildSandboxCreateOptions(name: string, image: string, labels: Record<string, string>): Docker.ContainerCreateOptions {
  return {
    name,
    Image: image,
    Entrypoint: [SANDBOX_PROGRAM_PATH],
    Cmd: [],
    User: "65534:65534",
    // As PID 1 it ignores SIGTERM; without this a host shutdown would wait out Docker's stop timeout on it.
    StopSignal: "SIGKILL",
    Labels: { ...labels, [LABEL_SANDBOX]: "true" },
    HostConfig: {
      NetworkMode: name,
      CapDrop: ["ALL"],
      SecurityOpt: ["no-new-privileges"],
      ReadonlyRootfs: true,
      // The program needs one task and a page or two, but runc's init (Go) runs in the
      // container's cgroups before it becomes the program, and its threads count as
      // tasks: at 4 tasks and 8 MB a start on a loaded machine sometimes died there, and
      // Docker answered "cannot start a stopped process" (twice in three CI runs here).
      // Caps, not reservations: a sandbox never uses them.
      PidsLimit: SANDBOX_PIDS_LIMIT,
      Memory: SANDBOX_MEMORY_MB * BYTES_PER_MB,
      MemorySwap: SANDBOX_MEMORY_MB * BYTES_PER_MB,
      LogConfig: { Type: "none", Config: {} },
      RestartPolicy: { Name: "no" },
    },
    NetworkingConfig: { EndpointsConfig: { [name]: {} } },
  };
}

export const SANDBOX_PROGRAM_PATH = "/pause";
/** What runc's init may need while it starts the program (see buildSandboxCreateOptions). */
const SANDBOX_MEMORY_MB = 32;
const SANDBOX_PIDS_LIMIT = 32;
