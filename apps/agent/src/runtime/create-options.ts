// Pure builders of what we ask Docker to create. Every tenant container gets the
// same hardened HostConfig; only limits, ports and GPUs vary with the spec.
import type Docker from "dockerode";
import { deploymentNetworkName, managedLabels } from "./labels";
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

function portKey(port: number): string {
  return `${port}/tcp`;
}

/**
 * Options for `docker.createContainer`. A cpuCores or memoryMb of 0 means "no
 * limit". No Binds, Mounts or Volumes are ever set: tenants see nothing of the
 * host's filesystem, and never the Docker socket.
 */
export function buildContainerCreateOptions(spec: ContainerSpec): Docker.ContainerCreateOptions {
  const network = deploymentNetworkName(spec.deploymentId);
  const hostConfig: Docker.HostConfig = {
    Privileged: false,
    CapDrop: ["ALL"],
    CapAdd: [...CONTAINER_CAPABILITIES],
    SecurityOpt: ["no-new-privileges"],
    PidsLimit: CONTAINER_PIDS_LIMIT,
    // tini as PID 1 reaps zombies and forwards SIGTERM, so `stop` is graceful for any image.
    Init: true,
    LogConfig: CONTAINER_LOG_CONFIG,
    NetworkMode: network,
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
    Labels: managedLabels(spec, spec.labels),
    ExposedPorts: Object.fromEntries(spec.exposedPorts.map((port) => [portKey(port), {}])),
    Tty: false,
    OpenStdin: false,
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    HostConfig: hostConfig,
    NetworkingConfig: { EndpointsConfig: { [network]: {} } },
  };
}

/** The deployment's own bridge network: tenants on one node cannot reach each other. */
export function buildNetworkCreateOptions(spec: ContainerSpec): Docker.NetworkCreateOptions {
  return {
    Name: deploymentNetworkName(spec.deploymentId),
    Driver: "bridge",
    CheckDuplicate: true,
    Labels: managedLabels(spec, spec.labels),
  };
}
