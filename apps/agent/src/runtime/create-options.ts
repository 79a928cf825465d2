// Pure builders of what we ask Docker to create. Every tenant container gets the
// same hardened HostConfig; only limits, ports and GPUs vary with the spec.
import type Docker from "dockerode";
import { LABEL_PORTS, LABEL_SANDBOX, LABEL_SANDBOX_NAME, managedLabels } from "./labels";
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
export const CONTAINER_CAPABILITIES = [
  "CHOWN",
  "DAC_OVERRIDE",
  "FOWNER",
  "FSETID",
  "SETGID",
  "SETUID",
  "NET_BIND_SERVICE",
  "KILL",
] as const;

/** Stops fork bombs; generous for dataloader workers and web servers. */
export const CONTAINER_PIDS_LIMIT = 1024;

/** json-file with rotation: at most 30 MB of logs per container on the operator's disk. */
export const CONTAINER_LOG_CONFIG = { Type: "json-file", Config: { "max-size": "10m", "max-file": "3" } };

const NANO_CPUS_PER_CORE = 1_000_000_000;
const BYTES_PER_MB = 1024 * 1024;

/**
 * Options for `docker.createContainer`. A cpuCores or memoryMb of 0 means "no
 * limit". No Binds, Mounts or Volumes are ever set: tenants see nothing of the
 * host's filesystem, and never the Docker socket.
 *
 * The container joins the network namespace of `sandbox`, a container holding
 * the deployment's own bridge network (sandboxes.ts): it gets that network's
 * address, DNS and hostname, and starts without waiting for a network to be set up.
 */
export function buildContainerCreateOptions(spec: ContainerSpec, sandbox: string): Docker.ContainerCreateOptions {
  const hostConfig: Docker.HostConfig = {
    Privileged: false,
    CapDrop: ["ALL"],
    CapAdd: [...CONTAINER_CAPABILITIES],
    SecurityOpt: ["no-new-privileges"],
    PidsLimit: CONTAINER_PIDS_LIMIT,
    // tini as PID 1 reaps zombies and forwards SIGTERM, so `stop` is graceful for any image.
    Init: true,
    LogConfig: CONTAINER_LOG_CONFIG,
    NetworkMode: `container:${sandbox}`,
    // No host ports: a tenant's port is reached only through the control plane's
    // tunnel to the container's address on its own network, never from outside.
    // The agent restarts (or not) deployments itself; Docker must not race it.
    RestartPolicy: { Name: "no" },
  };
  if (spec.cpuCores > 0) hostConfig.NanoCpus = Math.round(spec.cpuCores * NANO_CPUS_PER_CORE);
  if (spec.memoryMb > 0) {
    hostConfig.Memory = spec.memoryMb * BYTES_PER_MB;
    // Same as Memory: no swap on top of the limit, so the limit is what the tenant paid for.
    hostConfig.MemorySwap = spec.memoryMb * BYTES_PER_MB;
  }
  if (spec.gpuDeviceIds.length > 0) {
    hostConfig.DeviceRequests = [{ Driver: "nvidia", DeviceIDs: [...spec.gpuDeviceIds], Capabilities: [["gpu"]] }];
  }

  return {
    ...(spec.name ? { name: spec.name } : {}),
    Image: spec.image,
    Env: Object.entries(spec.env).map(([key, value]) => `${key}=${value}`),
    ...(spec.cmd ? { Cmd: [...spec.cmd] } : {}),
    Labels: { ...managedLabels(spec, spec.labels), [LABEL_SANDBOX_NAME]: sandbox, [LABEL_PORTS]: spec.exposedPorts.join(",") },
    Tty: false,
    OpenStdin: false,
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    HostConfig: hostConfig,
  };
}

/** A sandbox's own bridge network: tenants on one node cannot reach each other. */
export function buildSandboxNetworkOptions(name: string, labels: Record<string, string>): Docker.NetworkCreateOptions {
  return { Name: name, Driver: "bridge", CheckDuplicate: true, Labels: { ...labels, [LABEL_SANDBOX]: "true" } };
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
      PidsLimit: 4,
      Memory: SANDBOX_MEMORY_MB * BYTES_PER_MB,
      MemorySwap: SANDBOX_MEMORY_MB * BYTES_PER_MB,
      LogConfig: { Type: "none", Config: {} },
      RestartPolicy: { Name: "no" },
    },
    NetworkingConfig: { EndpointsConfig: { [name]: {} } },
  };
}

export const SANDBOX_PROGRAM_PATH = "/pause";
/** Docker's smallest allowed limit is 6 MB; the program itself needs a page or two. */
const SANDBOX_MEMORY_MB = 8;
