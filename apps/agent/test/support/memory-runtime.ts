// A container engine in memory, behind the agent's ContainerRuntime port, for
// tests of the agent's own logic (reconciler, log shipping) that must run in
// milliseconds with no Docker engine reachable. It keeps Docker's semantics
// where the agent depends on them: stop sends SIGTERM and kills after the
// timeout, remove kills, a wait ends with the exit, names are unique, a missing
// image is a 404, logs come with nanosecond timestamps and honour tail and since.
// Time is the test's clock, so a 10 s stop timeout costs nothing.
//
// It lives with the tests, not in src/runtime: the agent has no mode that runs
// without an engine, and the real adapter is tested against real Docker
// (test/runtime/docker-*.test.ts). The network sandbox pool is DockerRuntime's
// business below this port; here a container simply gets an address.

import type { Readable } from "node:stream";
import { localImageCandidates } from "@cm/protocol";
import type { Clock, TimerHandle } from "../../src/clock";
import type { ContainerRuntime, EnsuredImage, EnsureImageOptions, ExecOptions, ExecProcess } from "../../src/runtime/container-runtime";
import type { EngineRestarts } from "../../src/runtime/docker-engine-events";
import { ContainerNotFoundError, ImageUnavailableError, PathNotFoundError } from "../../src/runtime/errors";
import { LABEL_MANAGED, LABEL_PORTS, managedLabels } from "../../src/runtime/labels";
import type { SandboxOwner } from "../../src/runtime/sandboxes";
import type { ContainerExit, ContainerSpec, ContainerState, EngineInfo, LogLine, LogOptions, LogStreamHandle } from "../../src/runtime/types";

/** What the image's program does. */
export interface ProgramBehaviour {
  /** On SIGTERM: exit with this code (after afterMs), or ignore it and be killed when the stop times out. Default: exit 143 at once. */
  onSigterm?: { exitCode: number; afterMs?: number } | "ignore";
  /** Docker's error when the program cannot start, e.g. `exec: "python": executable file not found in $PATH` */
  startError?: string;
  /** lines the program prints as soon as it starts, on stdout, then on stderr */
  output?: string[];
  errorOutput?: string[];
  /** it ends by itself with this code right after its output, instead of running until stopped */
  exitCode?: number;
}

export interface RegistryImage {
  layers?: number;
  /** how long the pull takes on the clock, spread evenly over the layers */
  pullMs?: number;
  /** the registry stops sending after the first layer: the pull never ends by itself */
  stalls?: boolean;
  behaviour?: ProgramBehaviour;
}

/** One container as the operator sees it in `docker ps -a`, with what the agent asked for. */
export interface EngineContainer {
  readonly id: string;
  readonly name: string;
  /** what createContainer was given: image, env, limits, GPUs, labels */
  readonly spec: ContainerSpec;
  /** signals the engine sent the program, in order */
  readonly signals: ReadonlyArray<"SIGTERM" | "SIGKILL">;
  readonly state: ContainerState;
  readonly log: readonly LogLine[];
}

type Operation = "listManaged" | "createContainer" | "start" | "stop" | "remove" | "inspect" | "ensureImage";

interface Container {
  id: string;
  name: string;
  spec: ContainerSpec;
  labels: Record<string, string>;
  behaviour: ProgramBehaviour;
  status: "created" | "running" | "exited";
  exitCode: number;
  oomKilled: boolean;
  error: string;
  startedAt: string | null;
  finishedAt: string | null;
  address: string | null;
  signals: Array<"SIGTERM" | "SIGKILL">;
  log: LogLine[];
  /** waitExit callers and following log streams, told when it stops running */
  onStop: Set<() => void>;
  /** following log streams, given each line as it is written */
  followers: Set<(line: LogLine) => void>;
  killTimer?: TimerHandle;
  termTimer?: TimerHandle;
}

/** A command run with exec, as the test sees it. */
export interface MemoryExec extends ExecProcess {
  readonly command: string[];
  readonly tty: boolean;
  /** the terminal's sizes, the first one given at start */
  readonly sizes: Array<{ cols: number; rows: number }>;
  detached: boolean;
  /** The command ends by itself with this code. */
  end(code: number): void;
}

/** The shape of dockerode's errors, which the agent reads Docker's message and status from. */
export function dockerError(statusCode: number, message: string): Error {
  return Object.assign(new Error(`(HTTP code ${statusCode}) ${message}`), { statusCode, json: { message } });
}

export class MemoryRuntime implements ContainerRuntime, EngineRestarts {
  private readonly containers = new Map<string, Container>();
  private readonly local = new Map<string, ProgramBehaviour>();
  private readonly registry = new Map<string, RegistryImage>();
  private readonly faults = new Map<Operation, Error[]>();
  /** pending waitExit calls, failed when the daemon restarts */
  private readonly brokenWaits = new Set<(error: Error) => void>();
  /** told when the daemon answers again after restartDaemon() */
  private readonly engineListeners = new Set<() => void>();
  private created = 0;
  private starts = 0;
  /** the last nanosecond given to a log line, so lines of one millisecond stay in order */
  private lastLogNs = 0n;
  /** what keepSandboxesWarm was last asked, until stopWarming */
  warmingFor: SandboxOwner | undefined;
  /** every pull, in order */
  readonly pulls: string[] = [];
  /** every exec, in order */
  readonly execs: MemoryExec[] = [];

  constructor(
    private readonly clock: Clock,
    private readonly info: EngineInfo = { version: "27.0.0-memory", dataRoot: "/var/lib/docker", runtimes: ["runc"], architecture: "x86_64" },
  ) {}

  /** An image already on the node (an operator's `docker pull` or `docker load`). */
  loadImage(ref: string, behaviour: ProgramBehaviour = {}): this {
    this.local.set(ref, behaviour);
    return this;
  }

  /** An image the node can pull. */
  publish(ref: string, image: RegistryImage = {}): this {
    this.registry.set(ref, image);
    return this;
  }

  /** The next `operation` fails with `error` (once per call to this). */
  failNext(operation: Operation, error: Error): this {
    this.faults.set(operation, [...(this.faults.get(operation) ?? []), error]);
    return this;
  }

  /** `docker ps -a`, oldest first. */
  ps(): EngineContainer[] {
    return [...this.containers.values()].map((c) => this.view(c));
  }

  /** The container by id or name; throws when there is none. */
  container(idOrName: string): EngineContainer {
    return this.view(this.find(idOrName));
  }

  /** The program prints a line. */
  write(idOrName: string, message: string, stream: LogLine["stream"] = "stdout"): void {
    const container = this.find(idOrName);
    if (container.status !== "running") throw new Error(`container ${container.name} is not running and cannot write`);
    this.print(container, message, stream);
  }

  /** The program ends by itself (exitCode 137 with oomKilled: the kernel's OOM killer). */
  exit(idOrName: string, exitCode: number, details: { oomKilled?: boolean; error?: string } = {}): void {
    this.end(this.find(idOrName), exitCode, details);
  }

  /** An operator's `docker rm -f`. */
  removeOutOfBand(idOrName: string): void {
    this.destroy(this.find(idOrName));
  }

  /**
   * dockerd restarts with live-restore: containers keep running, but every
   * `docker wait` in progress ends with a broken connection; then it answers
   * again, which those watching for it (onEngineBack) are told.
   */
  restartDaemon(): void {
    for (const broken of [...this.brokenWaits]) broken(new Error("socket hang up"));
    this.brokenWaits.clear();
    for (const listener of [...this.engineListeners]) listener();
  }

  onEngineBack(listener: () => void): () => void {
    this.engineListeners.add(listener);
    return () => this.engineListeners.delete(listener);
  }

  async engineVersion(): Promise<string> {
    return this.info.version;
  }

  async engineInfo(): Promise<EngineInfo> {
    return { ...this.info, runtimes: [...this.info.runtimes] };
  }

  async imagePresent(ref: string): Promise<boolean> {
    return this.localName(ref) !== undefined;
  }

  async ensureImage(ref: string, { onProgress, signal }: EnsureImageOptions = {}): Promise<EnsuredImage> {
    this.fault("ensureImage");
    const local = this.localName(ref);
    if (local !== undefined) return { ref: local, pulled: false };
    const image = this.registry.get(ref);
    this.pulls.push(ref);
    if (!image)
      throw new ImageUnavailableError(ref, `pull access denied for ${ref.replace(/:[^/:]*$/, "")}, repository does not exist or may require 'docker login'`);
    const layers = image.layers ?? 1;
    for (let done = 0; done < layers; done++) {
      onProgress?.({ layersDone: done, layersTotal: layers });
      if (image.stalls && done > 0) await new Promise((_, reject) => signal?.addEventListener("abort", () => reject(signal.reason), { once: true }));
      await this.sleep((image.pullMs ?? 0) / layers);
      signal?.throwIfAborted();
    }
    onProgress?.({ layersDone: layers, layersTotal: layers });
    this.local.set(ref, image.behaviour ?? {});
    return { ref, pulled: true };
  }

  keepSandboxesWarm(owner: SandboxOwner): void {
    this.warmingFor = owner;
  }

  async stopWarming(): Promise<void> {
    this.warmingFor = undefined;
  }

  async discardSandboxes(): Promise<void> {
    this.warmingFor = undefined;
  }

  async createContainer(spec: ContainerSpec): Promise<string> {
    this.fault("createContainer");
    const image = this.localName(spec.image);
    if (image === undefined) throw dockerError(404, `No such image: ${spec.image}`);
    const behaviour = this.local.get(image)!;
    this.created += 1;
    const id = this.created.toString(16).padStart(64, "0");
    const name = spec.name ?? `memory_${this.created}`;
    const taken = [...this.containers.values()].find((c) => c.name === name);
    if (taken)
      throw dockerError(
        409,
        `Conflict. The container name "/${name}" is already in use by container "${taken.id}". You have to remove (or rename) that container to be able to reuse that name.`,
      );
    this.containers.set(id, {
      id,
      name,
      spec: structuredClone(spec),
      labels: { ...managedLabels(spec, spec.labels), [LABEL_PORTS]: spec.exposedPorts.join(",") },
      behaviour,
      status: "created",
      exitCode: 0,
      oomKilled: false,
      error: "",
      startedAt: null,
      finishedAt: null,
      address: null,
      signals: [],
      log: [],
      onStop: new Set(),
      followers: new Set(),
    });
    return id;
  }

  async start(id: string): Promise<void> {
    this.fault("start");
    const container = this.find(id, true);
    if (container.status === "running") return;
    if (container.behaviour.startError) {
      container.error = container.behaviour.startError;
      container.exitCode = 127;
      throw dockerError(
        400,
        `failed to create task for container: failed to create shim task: OCI runtime create failed: ${container.behaviour.startError}: unknown`,
      );
    }
    Object.assign(container, { status: "running", startedAt: this.iso(), finishedAt: null, exitCode: 0, oomKilled: false, error: "", signals: [] });
    this.starts += 1;
    container.address = `10.88.${Math.floor(this.starts / 250) % 256}.${(this.starts % 250) + 2}`;
    for (const message of container.behaviour.output ?? []) this.print(container, message, "stdout");
    for (const message of container.behaviour.errorOutput ?? []) this.print(container, message, "stderr");
    const { exitCode } = container.behaviour;
    if (exitCode !== undefined) this.clock.setTimeout(() => this.end(container, exitCode), 0);
  }

  async stop(id: string, timeoutS: number): Promise<void> {
    this.fault("stop");
    const container = this.find(id, true);
    if (container.status !== "running") return;
    const stopped = new Promise<void>((resolve) => container.onStop.add(resolve));
    if (!container.signals.includes("SIGTERM")) {
      container.signals.push("SIGTERM");
      const onSigterm = container.behaviour.onSigterm ?? { exitCode: 143 };
      if (onSigterm !== "ignore" && (onSigterm.afterMs ?? 0) < timeoutS * 1000) {
        container.termTimer = this.clock.setTimeout(() => this.end(container, onSigterm.exitCode), onSigterm.afterMs ?? 0);
      }
      container.killTimer = this.clock.setTimeout(() => this.kill(container), timeoutS * 1000);
    }
    await stopped;
  }

  async remove(id: string): Promise<void> {
    this.fault("remove");
    const container = this.containers.get(id) ?? [...this.containers.values()].find((c) => c.name === id);
    if (container) this.destroy(container);
  }

  async inspect(id: string): Promise<ContainerState> {
    this.fault("inspect");
    return this.state(this.find(id, true));
  }

  async listManaged(filterLabels: Record<string, string> = {}): Promise<ContainerState[]> {
    this.fault("listManaged");
    const wanted = { [LABEL_MANAGED]: "true", ...filterLabels };
    return [...this.containers.values()].filter((c) => Object.entries(wanted).every(([key, value]) => c.labels[key] === value)).map((c) => this.state(c));
  }

  async waitExit(id: string): Promise<ContainerExit> {
    const container = this.find(id, true);
    if (container.status === "running") {
      await new Promise<void>((resolve, reject) => {
        const exited = () => {
          this.brokenWaits.delete(broken);
          resolve();
        };
        const broken = (error: Error) => {
          container.onStop.delete(exited);
          reject(error);
        };
        container.onStop.add(exited);
        this.brokenWaits.add(broken);
      });
    }
    return { id: container.id, exitCode: container.exitCode, oomKilled: container.oomKilled, error: container.error };
  }

  /**
   * docker exec, with one program: `cat` (stdin back on stdout until stdin ends,
   * then exit 0). Each process is kept in `execs` for the test to look at or end.
   */
  async exec(containerId: string, options: ExecOptions): Promise<ExecProcess> {
    const container = this.find(containerId, true);
    if (container.status !== "running") throw dockerError(409, `Container ${container.id} is not running`);
    let finish!: (code: number) => void;
    const exit = new Promise<number>((resolve) => (finish = resolve));
    let ended = false;
    const end = (code: number) => {
      if (ended) return;
      ended = true;
      container.onStop.delete(killed);
      finish(code);
    };
    const killed = () => end(137);
    container.onStop.add(killed);
    const process: MemoryExec = {
      command: [...options.command],
      tty: options.tty,
      sizes: options.cols && options.rows ? [{ cols: options.cols, rows: options.rows }] : [],
      detached: false,
      write: (chunk) => {
        if (!ended) options.onOutput("stdout", Buffer.from(chunk));
        return true;
      },
      drained: async () => {},
      endStdin: () => end(0),
      resize: async (cols, rows) => void process.sizes.push({ cols, rows }),
      pauseOutput: () => {},
      resumeOutput: () => {},
      exit,
      detach: async () => {
        process.detached = true;
        end(options.tty ? 129 : 0);
      },
      end,
    };
    this.execs.push(process);
    return process;
  }

  async logs(id: string, options: LogOptions, onLine: (line: LogLine) => void): Promise<LogStreamHandle> {
    const container = this.find(id, true);
    // Docker reads the last `tail` lines, then drops those before `since`.
    let lines = options.tail === undefined ? container.log : container.log.slice(-options.tail);
    if (options.since) lines = lines.filter((line) => Date.parse(line.timestamp) >= options.since!.getTime());
    for (const line of lines) onLine(line);
    if (!options.follow || container.status !== "running") return { stop: () => {}, done: Promise.resolve() };
    let end!: () => void;
    const done = new Promise<void>((resolve) => (end = resolve));
    const stop = () => {
      container.followers.delete(onLine);
      container.onStop.delete(stop);
      end();
    };
    container.followers.add(onLine);
    container.onStop.add(stop);
    return { stop, done };
  }

  private fault(operation: Operation): void {
    const error = this.faults.get(operation)?.shift();
    if (error) throw error;
  }

  private localName(ref: string): string | undefined {
    return localImageCandidates(ref).find((candidate) => this.local.has(candidate));
  }

  /** Throws ContainerNotFoundError as the runtime does (`port`), else a test's mistake. */
  /**
   * docker cp's archive: the memory engine keeps no files, so every path of a
   * container it has is missing (the Docker adapter is tested against Docker).
   */
  async archive(containerId: string, path: string): Promise<Readable> {
    this.find(containerId, true);
    throw new PathNotFoundError(path);
  }

  private find(idOrName: string, port = false): Container {
    const container = this.containers.get(idOrName) ?? [...this.containers.values()].find((c) => c.name === idOrName);
    if (container) return container;
    if (port) throw new ContainerNotFoundError(idOrName);
    throw new Error(`the memory engine has no container ${idOrName}`);
  }

  private kill(container: Container): void {
    if (container.status !== "running") return;
    container.signals.push("SIGKILL");
    this.end(container, 137);
  }

  private end(container: Container, exitCode: number, details: { oomKilled?: boolean; error?: string } = {}): void {
    if (container.status !== "running") return;
    this.clock.clearTimeout(container.termTimer);
    this.clock.clearTimeout(container.killTimer);
    Object.assign(container, {
      status: "exited",
      exitCode,
      oomKilled: details.oomKilled ?? false,
      error: details.error ?? "",
      finishedAt: this.iso(),
      address: null,
    });
    for (const told of [...container.onStop]) told();
    container.onStop.clear();
  }

  private destroy(container: Container): void {
    if (container.status === "running") this.kill(container);
    this.containers.delete(container.id);
  }

  private state(c: Container): ContainerState {
    const running = c.status === "running";
    return {
      id: c.id,
      name: c.name,
      deploymentId: c.spec.deploymentId,
      nodeId: c.spec.nodeId,
      userId: c.spec.userId,
      image: c.spec.image,
      labels: { ...c.labels },
      status: c.status,
      running,
      exitCode: running || c.startedAt === null ? null : c.exitCode,
      startedAt: c.startedAt,
      finishedAt: running ? null : c.finishedAt,
      oomKilled: c.oomKilled,
      error: c.error,
      ipAddress: running ? c.address : null,
      ports: c.spec.exposedPorts.map((containerPort) => ({ containerPort })),
      // Read through logs(), as on an engine whose files the agent may not read.
      logPath: null,
    };
  }

  private view(c: Container): EngineContainer {
    return { id: c.id, name: c.name, spec: structuredClone(c.spec), signals: [...c.signals], state: this.state(c), log: [...c.log] };
  }

  private print(container: Container, message: string, stream: LogLine["stream"]): void {
    const line = this.stamp(message, stream);
    container.log.push(line);
    for (const follower of container.followers) follower(line);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.clock.setTimeout(resolve, ms));
  }

  private iso(): string {
    return new Date(this.clock.now()).toISOString();
  }

  /** Docker's RFC 3339 stamp with nanoseconds: the clock's millisecond, and a nanosecond later than the last line. */
  private stamp(message: string, stream: LogLine["stream"]): LogLine {
    const clockNs = BigInt(this.clock.now()) * 1_000_000n;
    this.lastLogNs = clockNs > this.lastLogNs ? clockNs : this.lastLogNs + 1n;
    const ms = Number(this.lastLogNs / 1_000_000n);
    const secondIso = new Date(Math.floor(ms / 1000) * 1000).toISOString().slice(0, 19);
    const dockerTimestamp = `${secondIso}.${String(this.lastLogNs % 1_000_000_000n).padStart(9, "0")}Z`;
    return { timestamp: new Date(ms).toISOString(), dockerTimestamp, stream, message };
  }
}
