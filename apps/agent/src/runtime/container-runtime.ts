// The agent's only view of the container engine, split per concern like
// testcontainers-node's container-runtime clients. DockerRuntime implements it;
// tests and the agent's state machine can use fakes.
import type { Readable } from "node:stream";
import type { RegistryAuth } from "@cm/protocol";
import type { SandboxOwner } from "./sandboxes";
import type { ContainerExit, ContainerSpec, ContainerState, EngineInfo, LogLine, LogOptions, LogStreamHandle, PullProgress } from "./types";

export interface EngineClient {
  engineVersion(): Promise<string>;
  engineInfo(): Promise<EngineInfo>;
}

export interface EnsuredImage {
  /** the local name the image was found or pulled under; create containers from this */
  ref: string;
  pulled: boolean;
}

export interface EnsureImageOptions {
  onProgress?: (progress: PullProgress) => void;
  /** a private image's login: used for this pull only and never logged */
  auth?: RegistryAuth;
  /** aborting it ends the pull at once (the engine's download with it) and rejects with the signal's reason */
  signal?: AbortSignal;
}

export interface ImageClient {
  imagePresent(ref: string): Promise<boolean>;
  /**
   * Uses a local copy when there is one (never pulls it again: operators may
   * preload images, and a node without registry access must still run them).
   * Otherwise pulls, reporting progress. Rejects with ImageUnavailableError,
   * or with the signal's reason once it is aborted.
   */
  ensureImage(ref: string, options?: EnsureImageOptions): Promise<EnsuredImage>;
  /**
   * The names (RepoTags) of local images with neither a CMD nor an ENTRYPOINT,
   * at most `max`: a deployment naming one with no command cannot start here.
   */
  imagesWithoutCommand?(max: number): Promise<string[]>;
}

export interface SandboxClient {
  /**
   * Keeps a few network sandboxes ready for `owner`'s next containers, so a
   * deployment starts without waiting for its network to be made.
   */
  keepSandboxesWarm(owner: SandboxOwner): void;
  /** Stops making sandboxes (ready ones stay for the next agent); settles when none is being made. */
  stopWarming(): Promise<void>;
  /** The node was retired: stops making sandboxes and removes every one made for `owner` that no container uses. */
  discardSandboxes(owner: SandboxOwner): Promise<void>;
}

export interface ContainerClient {
  /** Creates the container in a network sandbox of its own; returns the container id. */
  createContainer(spec: ContainerSpec): Promise<string>;
  start(id: string): Promise<void>;
  /** SIGTERM, then SIGKILL after timeoutS. Stopping a stopped container is not an error. */
  stop(id: string, timeoutS: number): Promise<void>;
  /** Force-removes the container and then its sandbox and network; already-gone is not an error. */
  remove(id: string): Promise<void>;
  /** Rejects with ContainerNotFoundError when there is no such container. */
  inspect(id: string): Promise<ContainerState>;
  /** Every container carrying cm.managed=true, running or not: what to adopt after an agent restart. */
  listManaged(filterLabels?: Record<string, string>): Promise<ContainerState[]>;
  /**
   * Settles when the container is not running, at once if it already is not.
   * Call it after start(): a created-but-unstarted container counts as not running.
   */
  waitExit(id: string): Promise<ContainerExit>;
}

export interface LogClient {
  /**
   * Streams the container's output one line at a time, stdout and stderr apart.
   * With follow=false it resolves after the last line was delivered.
   */
  logs(id: string, options: LogOptions, onLine: (line: LogLine) => void): Promise<LogStreamHandle>;
}

export interface ExecOptions {
  /** argv, run as the container's user in its working directory */
  command: string[];
  tty: boolean;
  cols?: number;
  rows?: number;
  /** Each chunk of output as it comes; with a tty everything is stdout. */
  onOutput(stream: "stdout" | "stderr", chunk: Buffer): void;
}

/** A command running in a container (docker exec), its stdin open. */
export interface ExecProcess {
  /**
   * Passes bytes to the command's stdin. False once the engine holds more than the
   * command has read: write no more until `drained()`, or a tenant piping into a
   * command that never reads fills the agent's memory.
   */
  write(chunk: Uint8Array): boolean;
  /** Resolves once stdin takes more (at once when it already does), or the command's streams are gone. */
  drained(): Promise<void>;
  /** Closes stdin: the command reads end of file. */
  endStdin(): void;
  resize(cols: number, rows: number): Promise<void>;
  /** Stops reading the command's output (the reader is behind); the command blocks once its pipe is full. */
  pauseOutput(): void;
  resumeOutput(): void;
  /** The command's exit code, once its output has ended. */
  readonly exit: Promise<number>;
  /**
   * Lets go of the command's streams: its client left. The command is hung up
   * on (SIGHUP), as when a terminal closes; without a tty, killed if it is still
   * running after a grace period (exec-hangup.ts). Settles once that is done;
   * calling it again answers the same.
   */
  detach(): Promise<void>;
}

export interface ExecClient {
  /** Runs a command in a running container; rejects with ContainerNotFoundError when there is none. */
  exec(containerId: string, options: ExecOptions): Promise<ExecProcess>;
}

export interface ArchiveClient {
  /**
   * `path` of the container, running or not, as a tar archive (the engine's
   * archive API: the top entry is the path's last name, `.` for a path ending
   * in `/.`). Destroying the stream ends the engine's read. Rejects with
   * PathNotFoundError when nothing is at the path, ContainerNotFoundError when
   * there is no such container.
   */
  archive(containerId: string, path: string): Promise<Readable>;
}

export interface ContainerRuntime extends EngineClient, ImageClient, SandboxClient, ContainerClient, LogClient, ExecClient, ArchiveClient {}
