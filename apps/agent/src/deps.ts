// The one place that builds the agent's real dependencies from its config.
import { systemClock } from "./clock";
import type { AgentConfig } from "./config";
import { wsSocketFactory } from "./connection/socket";
import { SystemHostProbe } from "./host/probe";
import { createLogger } from "./logger";
import type { Logger } from "./logger";
import { DockerRuntime } from "./runtime/docker-runtime";
import type { AgentDeps } from "./agent";

export function createDeps(config: Pick<AgentConfig, "dockerSocket" | "logLevel"> & Partial<Pick<AgentConfig, "sandboxPool">>, logger: Logger = createLogger({ level: config.logLevel })): AgentDeps {
  const runtime = new DockerRuntime({ socketPath: dockerSocketPath(config.dockerSocket), logger, ...(config.sandboxPool === undefined ? {} : { sandboxPool: config.sandboxPool }) });
  const hostProbe = new SystemHostProbe({ dockerEngine: () => runtime.engineInfo() });
  return { runtime, hostProbe, socketFactory: wsSocketFactory(), clock: systemClock, logger };
}

/** DOCKER_SOCKET may be a path or a unix:// URL, as DOCKER_HOST is written. */
export function dockerSocketPath(value: string): string {
  return value.replace(/^unix:\/\//, "");
}
