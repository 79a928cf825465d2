// ContainerRuntime on a Docker engine through dockerode: the only place in the
// agent that imports dockerode. Each concern lives in its own client; this class
// only puts them behind the one interface.
import type { Readable } from "node:stream";
import Docker from "dockerode";
import { type Clock, systemClock } from "../clock";
import type { ContainerRuntime, EnsuredImage, EnsureImageOptions, ExecOptions, ExecProcess } from "./container-runtime";
import { DockerArchiveClient } from "./docker-archive-client";
import { DockerContainerClient } from "./docker-container-client";
import type { DiskClient, WritableLayer } from "./docker-disk-client";
import { DockerDiskClient } from "./docker-disk-client";
import { DockerEngineEvents, type EngineRestarts } from "./docker-engine-events";
import { DockerExecClient } from "./docker-exec-client";
import { DockerImageClient } from "./docker-image-client";
import { DockerLogClient } from "./docker-log-client";
import { DockerSandboxEngine } from "./docker-sandbox-engine";
import type { RuntimeLogger } from "./logger";
import { silentLogger } from "./logger";
import type { SandboxOwner } from "./sandboxes";
import { DEFAULT_SANDBOX_POOL, SandboxPool } from "./sandboxes";
import type { ContainerExit, ContainerSpec, ContainerState, EngineInfo, LogLine, LogOptions, LogStreamHandle } from "./types";

export interface DockerRuntimeOptions {
  /** defaults to dockerode's own resolution: DOCKER_HOST, else /var/run/docker.sock */
  docker?: Docker;
  /** the engine's Unix socket, used when `docker` is not given */
  socketPath?: string;
  logger?: RuntimeLogger;
  /** ready network sandboxes kept once keepSandboxesWarm() is called (sandboxes.ts) */
  sandboxPool?: number;
  /** how deployments' bridges are named (create-options.ts DEFAULT_BRIDGE_PREFIX); tests use their own */
  bridgePrefix?: string;
  /** times the retries while the engine is away (docker-engine-events.ts) */
  clock?: Clock;
}

export class DockerRuntime implements ContainerRuntime, DiskClient, EngineRestarts {
  private readonly docker: Docker;
  private readonly logger: RuntimeLogger;
  private readonly images: DockerImageClient;
  private readonly containers: DockerContainerClient;
  private readonly logClient: DockerLogClient;
  private readonly sandboxes: SandboxPool;
  private readonly disk: DockerDiskClient;
  private readonly engineEvents: DockerEngineEvents;
  private readonly execClient: DockerExecClient;
  private readonly archives: DockerArchiveClient;

  constructor(options: DockerRuntimeOptions = {}) {
    this.docker = options.docker ?? new Docker(options.socketPath ? { socketPath: options.socketPath } : undefined);
    this.logger = options.logger ?? silentLogger;
    this.images = new DockerImageClient(this.docker, this.logger);
    this.engineEvents = new DockerEngineEvents(this.docker, this.logger, options.clock ?? systemClock);
    this.sandboxes = new SandboxPool(new DockerSandboxEngine(this.docker, this.logger), this.logger, options.sandboxPool ?? DEFAULT_SANDBOX_POOL, {
      events: this.engineEvents,
      ...(options.bridgePrefix ? { bridgePrefix: options.bridgePrefix } : {}),
    });
    this.containers = new DockerContainerClient(this.docker, this.logger, this.sandboxes);
    this.logClient = new DockerLogClient(this.docker, this.logger);
    this.disk = new DockerDiskClient(this.docker, this.logger);
    this.execClient = new DockerExecClient(this.docker, this.logger);
    this.archives = new DockerArchiveClient(this.docker, this.logger);
  }

  async engineVersion(): Promise<string> {
    this.logger.debug("Fetching Docker engine version");
    return (await this.docker.version()).Version;
  }

  async engineInfo(): Promise<EngineInfo> {
    this.logger.debug("Fetching Docker engine info");
    const info = (await this.docker.info()) as { ServerVersion?: string; DockerRootDir?: string; Runtimes?: Record<string, unknown>; Architecture?: string };
    return {
      version: info.ServerVersion ?? (await this.engineVersion()),
      dataRoot: info.DockerRootDir ?? "/var/lib/docker",
      runtimes: Object.keys(info.Runtimes ?? {}).sort(),
      architecture: info.Architecture ?? "",
    };
  }

  onEngineBack(listener: () => void): () => void {
    return this.engineEvents.onEngineBack(listener);
  }

  imagePresent(ref: string): Promise<boolean> {
    return this.images.imagePresent(ref);
  }

  ensureImage(ref: string, options?: EnsureImageOptions): Promise<EnsuredImage> {
    return this.images.ensureImage(ref, options);
  }

  imagesWithoutCommand(max: number): Promise<string[]> {
    return this.images.imagesWithoutCommand(max);
  }

  keepSandboxesWarm(owner: SandboxOwner): void {
    this.sandboxes.keepWarm(owner);
  }

  stopWarming(): Promise<void> {
    return this.sandboxes.stopWarming();
  }

  discardSandboxes(owner: SandboxOwner): Promise<void> {
    return this.sandboxes.discard(owner);
  }

  createContainer(spec: ContainerSpec): Promise<string> {
    return this.containers.createContainer(spec);
  }

  start(id: string): Promise<void> {
    return this.containers.start(id);
  }

  stop(id: string, timeoutS: number): Promise<void> {
    return this.containers.stop(id, timeoutS);
  }

  remove(id: string): Promise<void> {
    return this.containers.remove(id);
  }

  inspect(id: string): Promise<ContainerState> {
    return this.containers.inspect(id);
  }

  listManaged(filterLabels?: Record<string, string>): Promise<ContainerState[]> {
    return this.containers.listManaged(filterLabels);
  }

  waitExit(id: string): Promise<ContainerExit> {
    return this.containers.waitExit(id);
  }

  writableLayers(filterLabels?: Record<string, string>): Promise<WritableLayer[]> {
    return this.disk.writableLayers(filterLabels);
  }

  freeBytes(path: string): Promise<number> {
    return this.disk.freeBytes(path);
  }

  exec(containerId: string, options: ExecOptions): Promise<ExecProcess> {
    return this.execClient.exec(containerId, options);
  }

  logs(id: string, options: LogOptions, onLine: (line: LogLine) => void): Promise<LogStreamHandle> {
    return this.logClient.logs(id, options, onLine);
  }

  archive(containerId: string, path: string): Promise<Readable> {
    return this.archives.archive(containerId, path);
  }
}
