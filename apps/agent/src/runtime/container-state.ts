// Pure translation of `docker inspect` output into ContainerState.
import type Docker from "dockerode";
import { deploymentNetworkName, LABEL_DEPLOYMENT_ID, LABEL_NODE_ID, LABEL_PORTS, LABEL_USER_ID } from "./labels";
import type { ContainerExit, ContainerState, PortMapping } from "./types";

// Docker's zero time.Time, which it reports for "never".
const DOCKER_ZERO_TIME = /^0001-01-01T00:00:00/;

function dockerTime(value: string | undefined): string | null {
  if (!value || DOCKER_ZERO_TIME.test(value)) return null;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? null : date.toISOString();
}

function tcpPort(key: string): number | undefined {
  const match = /^(\d+)\/tcp$/.exec(key);
  return match ? Number(match[1]) : undefined;
}

function portMappings(info: Docker.ContainerInspectInfo): PortMapping[] {
  // The image's EXPOSE, plus the deployment's own ports (a label: a container in a
  // joined network may not declare ExposedPorts itself).
  const labelled = (info.Config?.Labels?.[LABEL_PORTS] ?? "").split(",").filter((port) => /^\d+$/.test(port));
  const exposed = [...Object.keys(info.Config?.ExposedPorts ?? {}), ...labelled.map((port) => `${port}/tcp`)];
  // Ports is {} before start and maps a port to null when it is exposed but unpublished.
  const published = (info.NetworkSettings?.Ports ?? {}) as Record<string, { HostPort: string }[] | null>;
  const ports: PortMapping[] = [];
  for (const key of new Set([...exposed, ...Object.keys(published)])) {
    const containerPort = tcpPort(key);
    if (containerPort === undefined) continue;
    const hostPort = published[key]?.find((binding) => /^\d+$/.test(binding.HostPort))?.HostPort;
    ports.push(hostPort ? { containerPort, hostPort: Number(hostPort) } : { containerPort });
  }
  return ports.sort((a, b) => a.containerPort - b.containerPort);
}

/**
 * `sandboxAddress` is the address of the sandbox whose network the container
 * joined (its own NetworkSettings are empty then); containers made before
 * sandboxes have theirs on their deployment network.
 */
export function toContainerState(info: Docker.ContainerInspectInfo, sandboxAddress: string | null = null): ContainerState {
  const labels = info.Config?.Labels ?? {};
  const deploymentId = labels[LABEL_DEPLOYMENT_ID] ?? "";
  const state = info.State;
  const startedAt = dockerTime(state.StartedAt);
  const running = state.Running;
  const ownAddress = info.NetworkSettings?.Networks?.[deploymentNetworkName(deploymentId)]?.IPAddress || null;
  return {
    id: info.Id,
    name: info.Name.replace(/^\//, ""),
    deploymentId,
    nodeId: labels[LABEL_NODE_ID] ?? "",
    userId: labels[LABEL_USER_ID] ?? "",
    labels: { ...labels },
    image: info.Config?.Image ?? info.Image,
    status: state.Status,
    running,
    // Docker says 0 for containers that are running or never ran; that is not an exit.
    exitCode: running || startedAt === null ? null : state.ExitCode,
    startedAt,
    finishedAt: running ? null : dockerTime(state.FinishedAt),
    oomKilled: state.OOMKilled,
    error: state.Error ?? "",
    ipAddress: running ? (sandboxAddress ?? ownAddress) : null,
    ports: portMappings(info),
    logPath: info.HostConfig?.LogConfig?.Type === "json-file" && info.LogPath ? info.LogPath : null,
  };
}

export function toContainerExit(info: Docker.ContainerInspectInfo): ContainerExit {
  return { id: info.Id, exitCode: info.State.ExitCode, oomKilled: info.State.OOMKilled, error: info.State.Error ?? "" };
}
