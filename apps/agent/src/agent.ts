// The agent: one connection to the control plane, one reconciler over Docker,
// log shipping, specs and endpoint reports and tunnels, wired together. Built in-process by
// createAgent(config, deps); start() and stop() return promises and nothing
// here exits the process, so tests and the control plane's end-to-end suite
// can run agents side by side.
import { CLOSE_CODES, type DeploymentSpec, MAX_IMAGES_WITHOUT_COMMAND, retiredNodeOf, type ServerFrame } from "@cm/protocol";
import type { Clock } from "./clock";
import type { AgentConfig } from "./config";
import type { ConnectionFailure, ConnectionState, Welcome } from "./connection/connection";
import { Connection } from "./connection/connection";
import type { SocketFactory } from "./connection/socket";
import { DiskWatcher } from "./disk/disk-watcher";
import type { EgressGuard } from "./egress/egress-guard";
import { RegistryGuard, type RegistryProbe, systemRegistryProbe } from "./egress/registry-guard";
import { EndpointReporter } from "./endpoints/endpoint-reporter";
import { ExecOpener } from "./exec/exec-opener";
import type { HostProbe } from "./host/probe";
import type { InstallClaim } from "./install-identity";
import { claimInstall } from "./install-identity";
import type { Logger } from "./logger";
import { LogShipping } from "./logs/log-shipping";
import { ownContainer } from "./reconcile/own-container";
import { Reconciler } from "./reconcile/reconciler";
import { StatusReporter } from "./reconcile/status-reporter";
import type { ContainerRuntime } from "./runtime/container-runtime";
import type { DiskClient } from "./runtime/docker-disk-client";
import { HostFacts } from "./specs/host-facts";
import { SpecsReporter } from "./specs/specs-reporter";
import { ArchiveOpener } from "./tunnel/archive-opener";
import { TunnelOpener } from "./tunnel/tunnel-opener";
import { AGENT_VERSION } from "./version";

export interface AgentDeps {
  runtime: ContainerRuntime;
  hostProbe: HostProbe;
  socketFactory: SocketFactory;
  clock: Clock;
  logger: Logger;
  /** [0, 1), for backoff jitter */
  random?: () => number;
  /** keeps the egress policy on the host's firewall; without one (tests) deployments are not held to it */
  egress?: EgressGuard;
  /** DNS, registries' challenges and the node's addresses, for the registry guard; the system's without */
  registryProbe?: RegistryProbe;
  /** measures containers' writable layers and free disk; without one (tests) disk is not bounded */
  disk?: DiskClient;
}

export class Agent {
  readonly connection: Connection;
  readonly reconciler: Reconciler;
  private readonly logs: LogShipping;
  private readonly specs: SpecsReporter;
  private readonly tunnels: TunnelOpener;
  private readonly execs: ExecOpener;
  private readonly archives: ArchiveOpener;
  private readonly endpoints: EndpointReporter;
  private readonly diskWatcher: DiskWatcher | undefined;
  private readonly failureListeners = new Set<(failure: ConnectionFailure) => void>();
  private readonly retiredListeners = new Set<() => void>();
  /** set once the node is known retired: the drain, then the stop */
  private retiring: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  /** the state directory, held while the agent runs, and this install's id from it (install-identity.ts) */
  private install: InstallClaim | undefined;
  private started = false;
  /** The parts of a sync received so far, until the one without `more`. */
  private syncSoFar: DeploymentSpec[] | undefined;

  constructor(
    private readonly config: AgentConfig,
    private readonly deps: AgentDeps,
  ) {
    const { clock, logger, runtime } = deps;
    const timing = config.timing;
    this.connection = new Connection(
      {
        url: config.wsUrl,
        token: config.token,
        agentVersion: AGENT_VERSION,
        timing,
        socketFactory: deps.socketFactory,
        clock,
        logger,
        ...(deps.random ? { random: deps.random } : {}),
      },
      {
        onReady: (welcome) => this.onReady(welcome),
        onFrame: (frame) => this.onFrame(frame),
        onDown: () => this.onDown(),
        onFailed: (failure) => {
          // Retired while away (or past the drain time): removing what the node ran is the agent's last job, not a failure.
          if (failure.closeCode === CLOSE_CODES.RETIRED) return void this.retire(retiredNodeOf(failure.reason) ?? this.connection.welcome?.nodeId);
          for (const listener of this.failureListeners) listener(failure);
        },
        runningDeployments: () => this.reconciler.running(),
      },
    );
    this.logs = new LogShipping({
      runtime,
      send: (frame) => this.connection.send(frame),
      clock,
      logger,
      timing,
      maxFrameBytes: () => this.connection.welcome?.maxFrameBytes,
    });
    const facts = new HostFacts(deps.hostProbe, logger);
    const registries = new RegistryGuard(deps.registryProbe ?? systemRegistryProbe, config.registryAllow);
    const egress = deps.egress;
    this.specs = new SpecsReporter({
      facts,
      send: (frame) => this.connection.send(frame),
      clock,
      logger,
      intervalMs: timing.specsIntervalMs,
      ...(egress ? { egressPolicy: () => egress.state.mode } : {}),
      diskDefaultGb: config.diskDefaultGb,
      ...(runtime.imagesWithoutCommand
        ? { imagesWithoutCommand: () => runtime.imagesWithoutCommand?.(MAX_IMAGES_WITHOUT_COMMAND) ?? Promise.resolve([]) }
        : {}),
    });
    const reporter = new StatusReporter(
      { reliable: (frame) => this.connection.sendReliable(frame), unreliable: (frame) => this.connection.send(frame) },
      clock,
    );
    const runningContainer = (deploymentId: string) => this.reconciler.runningContainer(deploymentId);
    this.tunnels = new TunnelOpener({ tunnelUrl: config.tunnelUrl, token: config.token, runningContainer, logger });
    this.execs = new ExecOpener({ httpUrl: config.httpUrl, token: config.token, runtime, runningContainer, logger });
    const owner = () => ({ labels: config.containerLabels, nodeId: this.connection.welcome?.nodeId ?? "" });
    const container = (deploymentId: string) => ownContainer(runtime, owner(), deploymentId);
    this.archives = new ArchiveOpener({ tunnelUrl: config.tunnelUrl, token: config.token, runtime, container, logger });
    this.endpoints = new EndpointReporter({
      probe: (deploymentId) => this.tunnels.probe(deploymentId),
      running: () => this.reconciler.running(),
      send: (frame) => this.connection.send(frame),
      clock,
      logger,
      probeMs: timing.endpointProbeMs,
      idleProbeMs: timing.endpointIdleProbeMs,
    });
    this.reconciler = new Reconciler({
      runtime,
      reporter,
      logs: this.logs,
      clock,
      logger,
      containerLabels: config.containerLabels,
      installId: () => this.install?.installId,
      containerStopTimeoutS: timing.containerStopTimeoutS,
      pullLimits: { timeoutMs: config.pullTimeoutS * 1000, stallMs: config.pullStallS * 1000 },
      checkRegistry: (image) => registries.check(image),
      nodeFacts: () => facts.nodeFacts(),
      canShipLogs: () => this.connection.state === "ready",
      diskDefaultGb: config.diskDefaultGb,
      // A pulled image with no command: listed at once, so the next create of it is refused rather than failed here.
      imageWithoutCommand: () => this.specs.resend(),
      admit: async (spec) => {
        await deps.egress?.admit();
        await this.diskWatcher?.admit(spec.diskGb);
      },
    });
    if (deps.disk) {
      let dataRoot: string | undefined;
      this.diskWatcher = new DiskWatcher({
        disk: deps.disk,
        dataRoot: async () => (dataRoot ??= (await runtime.engineInfo()).dataRoot),
        reserveGb: config.diskReserveGb,
        defaultGb: config.diskDefaultGb,
        checkMs: timing.diskCheckMs,
        clock,
        logger,
        containerLabels: config.containerLabels,
        stopDeployment: (deploymentId, containerId, reason) => this.reconciler.stopForPolicy(deploymentId, containerId, reason),
      });
    }
  }

  get state(): ConnectionState {
    return this.connection.state;
  }

  /** Adopts the containers already on this machine, then connects. Rejects when Docker cannot be reached. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.deps.logger.info("Agent starting", { controlPlane: this.config.wsUrl, version: AGENT_VERSION });
    if (this.config.stateDir) this.install = claimInstall(this.config.stateDir, this.deps.logger);
    // Before any deployment can start: admission waits for it anyway, and tenants learn its state with the first specs.
    await this.deps.egress?.start();
    await this.reconciler.adopt();
    this.diskWatcher?.start();
    this.connection.start();
  }

  /** Closes the connection (going away) and stops following logs. Tenants' containers keep running. */
  async stop(): Promise<void> {
    await this.shutdown();
    if (!this.retiring) this.deps.logger.info("Agent stopped; containers were left running");
  }

  private shutdown(): Promise<void> {
    this.stopping ??= this.stopEverything();
    return this.stopping;
  }

  private async stopEverything(): Promise<void> {
    this.reconciler.stop();
    this.deps.egress?.stop();
    this.diskWatcher?.stop();
    await this.deps.runtime.stopWarming();
    this.logs.stopAll();
    this.specs.stop();
    this.endpoints.stop();
    this.tunnels.closeAll();
    this.archives.closeAll();
    await this.execs.closeAll();
    await this.connection.stop();
    this.install?.release();
  }

  /** Called once the node was retired, everything it ran removed and the agent stopped. */
  onRetired(listener: () => void): () => void {
    this.retiredListeners.add(listener);
    return () => this.retiredListeners.delete(listener);
  }

  /**
   * The operator retired this node: takes no more work, lets the stops already
   * queued finish (their last log lines go out while the connection lasts),
   * removes every container and network sandbox made for the node, then stops.
   */
  private retire(nodeId: string | undefined): Promise<void> {
    this.retiring ??= (async () => {
      const { logger } = this.deps;
      logger.warn("This node was retired by its operator: removing its containers and network sandboxes, then stopping", { nodeId });
      let removed = 0;
      try {
        await this.reconciler.idle();
        if (nodeId) {
          removed = await this.reconciler.drain(nodeId);
          await this.deps.runtime.discardSandboxes({ nodeId, labels: this.config.containerLabels });
        }
      } catch (error) {
        logger.error("Could not remove everything the retired node ran; see docker ps --filter label=cm.node-id", { nodeId, error: (error as Error).message });
      }
      await this.shutdown();
      logger.warn(
        `Node ${nodeId ?? "(unknown)"} was retired by its operator: its ${removed} container(s) and its network sandboxes were removed and the agent stopped. To offer this machine again, enrol it anew (cm operator add) and start the agent with the new token.`,
        { nodeId, removed },
      );
      for (const listener of this.retiredListeners) listener();
    })();
    return this.retiring;
  }

  /** Called when the control plane closed with a code that says not to retry (see RETRYABLE_CLOSE). */
  onFailure(listener: (failure: ConnectionFailure) => void): () => void {
    this.failureListeners.add(listener);
    return () => this.failureListeners.delete(listener);
  }

  private onReady(welcome: Welcome): void {
    this.reconciler.setNodeId(welcome.nodeId);
    const installId = this.install?.installId;
    this.deps.runtime.keepSandboxesWarm({ nodeId: welcome.nodeId, labels: this.config.containerLabels, ...(installId ? { installId } : {}) });
    this.specs.start();
    this.endpoints.start();
  }

  private onDown(): void {
    this.syncSoFar = undefined; // the next welcome brings a whole sync
    // Logs are re-read from Docker after the next sync, from what the control plane acknowledged.
    this.logs.stopAll();
    this.specs.stop();
    this.endpoints.stop();
  }

  private onFrame(frame: ServerFrame): void {
    // Draining a retired node: only acknowledgements of its last log lines still matter.
    if (this.retiring && frame.type !== "logs_ack") return;
    switch (frame.type) {
      case "retired":
        void this.retire(this.connection.welcome?.nodeId);
        return;
      case "sync": {
        // A long desired state comes in parts: reconcile once, with all of them.
        const whole = [...(this.syncSoFar ?? []), ...frame.deployments];
        this.syncSoFar = frame.more ? whole : undefined;
        if (!frame.more) void this.reconciler.sync(whole).then(() => this.endpoints.poke());
        return;
      }
      case "command":
        void this.reconciler.command(frame.action, frame.deployment).then((result) => {
          this.connection.send({ type: "ack", commandId: frame.commandId, ok: result.ok, ...(result.ok ? {} : { error: result.error }) });
          this.endpoints.poke();
        });
        return;
      case "open_tunnel":
        void this.openTunnel(frame);
        return;
      case "open_archive":
        void this.openArchive(frame);
        return;
      case "open_exec":
        void this.execs.openExec(frame).catch((error: Error) => this.deps.logger.warn("exec failed", { execId: frame.execId, error: error.message }));
        return;
      case "logs_ack":
        this.logs.onAck(frame.deploymentId, frame.cursor);
        return;
      case "welcome":
      case "error":
        return; // handled (and logged) by the connection
    }
  }

  private async openTunnel(request: Extract<ServerFrame, { type: "open_tunnel" }>): Promise<void> {
    const { tunnelId, deploymentId, port } = request;
    const result = await this.tunnels
      .openTunnel({ tunnelId, deploymentId, port })
      .catch((error: unknown) => ({ ok: false as const, reason: (error as Error).message }));
    if (!result.ok) this.connection.send({ type: "tunnel_error", tunnelId, reason: result.reason });
  }

  private async openArchive(request: Extract<ServerFrame, { type: "open_archive" }>): Promise<void> {
    const { tunnelId } = request;
    const result = await this.archives
      .openArchive(request)
      .catch((error: unknown) => ({ ok: false as const, code: "ARCHIVE_FAILED" as const, reason: (error as Error).message }));
    if (!result.ok) this.connection.send({ type: "tunnel_error", tunnelId, reason: result.reason, code: result.code });
  }
}

export function createAgent(config: AgentConfig, deps: AgentDeps): Agent {
  return new Agent(config, deps);
}
