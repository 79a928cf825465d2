import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { ServerFrame } from "@cm/protocol";
import { CLOSE_CODES, KeyedQueue, localImageCandidates, RETIRE_DRAIN_MS } from "@cm/protocol";
import { WebSocketServer } from "ws";
import type { NodeLink } from "../services/deployment-service";
import type { PeriodicJob, PeriodicWork } from "../services/periodic-work";
import type { AgentContext, SessionHost } from "./agent-context";
import { AgentSession } from "./agent-session";
import { CommandSweep } from "./command-sweep";
import type { TemplateNeeds } from "./desired-state";
import { HeartbeatBatch } from "./heartbeat-batch";
import { TokenBucket } from "./log-limits";
import { NodeContact } from "./node-contact";
import { SILENT_INTERVALS, SilenceWatch } from "./silence-watch";

export type AgentHubOptions = Omit<AgentContext, "hub"> & {
  heartbeatFlushMs: number;
  /** NODE_LOST_AFTER_S, in ms */
  nodeLostAfterMs: number;
  /** How often recent moves are read for a wake-up another replica sent and this one missed (command-sweep.ts); 0: never (one process). */
  commandSweepMs?: number;
  /** Where the replicas record which one holds each node's session (replica-hop.ts); absent: one process. */
  sessionDirectory?: { claim(nodeId: string): Promise<void>; release(nodeId: string): Promise<void>; heldElsewhere(nodeId: string): Promise<boolean> };
  /** Whose clock the hub's periods (offline monitor, heartbeat flush, command sweep) run on. */
  periodic: PeriodicWork;
};

/**
 * Bytes a connection may send before it is a ready agent: a hello is a few
 * hundred bytes and nothing else comes before the welcome. The frame limit
 * (AGENT_MAX_FRAME_BYTES) is for authenticated agents' log batches; without
 * this, anyone could hold that much memory per socket without a token.
 */
export const BYTES_BEFORE_READY = 16 * 1024;
/** Seconds of a node's log rate it may send at once. */
const LOG_BURST_S = 4;

/** Destroys the socket of a session that sends more than BYTES_BEFORE_READY before it is ready. */
function boundUntilReady(socket: Duplex, alreadyRead: number, session: AgentSession) {
  let read = alreadyRead;
  const count = (chunk: Buffer) => {
    if (session.ready || session.state === "closed") return void socket.off("data", count);
    read += chunk.length;
    if (read > BYTES_BEFORE_READY) socket.destroy();
  };
  socket.on("data", count);
}

/**
 * The control plane's side of every agent connection: one session per node, the
 * node's presence (online from hello; offline once three heartbeat intervals
 * pass without one, a closed socket included, so an agent restart or a network
 * blip costs nothing), and commands to the agent whenever the API changes
 * one of its deployments. Desired state lives in the database, so a command
 * that finds no session is not lost: the next sync carries it.
 */
export class AgentHub implements NodeLink, SessionHost {
  readonly heartbeats: HeartbeatBatch;
  /** Adopted sessions by node; `all` also holds those still in their handshake. */
  private readonly sessions = new Map<string, AgentSession>();
  private readonly all = new Set<AgentSession>();
  /** Each node's presence changes (online, lost, retired), one at a time per node. */
  private readonly presence = new KeyedQueue();
  private readonly wss: WebSocketServer;
  private readonly ctx: AgentContext;
  private templates: Promise<ReadonlyMap<string, TemplateNeeds>> | undefined;
  private timers: Array<() => void> = [];
  /** Each node's last proof of life from a session that has closed: where a stop while it is away bills to. */
  private readonly lastSeenAway = new Map<string, number>();
  private readonly logBudgets = new Map<string, TokenBucket>();
  private readonly checks = new KeyedQueue();
  private closing: Promise<void> | undefined;
  private readonly contact: NodeContact;
  private readonly silence: SilenceWatch;
  readonly sweep: CommandSweep;

  constructor(private readonly o: AgentHubOptions) {
    this.ctx = { ...o, hub: this };
    this.contact = new NodeContact({ ...o, lostAfterMs: o.nodeLostAfterMs });
    this.sweep = new CommandSweep({ ...o, session: (id) => this.sessions.get(id), holdsAny: () => this.sessions.size > 0 });
    this.heartbeats = new HeartbeatBatch(o.repos, o.log, SILENT_INTERVALS * o.heartbeatIntervalMs);
    this.silence = new SilenceWatch({
      ...o,
      heartbeats: this.heartbeats,
      contact: this.contact,
      heldElsewhere: o.sessionDirectory ? (id) => o.sessionDirectory!.heldElsewhere(id) : undefined,
      host: {
        session: (id) => this.sessions.get(id),
        dropSession: (id, s) => {
          this.sessions.delete(id);
          s.terminate();
        },
        serialize: (id, fn) => this.serialize(id, fn),
        lastAliveMs: (id, s, hb) => this.lastAliveMs(id, s, hb),
      },
    });
    this.wss = new WebSocketServer({ noServer: true, maxPayload: o.maxFrameBytes, clientTracking: false, perMessageDeflate: false });
    o.events.on("deployment-changed", (dep) => this.sessions.get(dep.nodeId)?.onDeploymentChanged(dep));
    o.events.on("node-retired", (nodeId) => void this.retired(nodeId));
    o.events.on(
      "node-changed",
      (nodeId) => void this.silence.offlineElsewhere(nodeId).catch((err) => o.log.error("agent: re-checking a node failed", { err, nodeId })),
    );
  }

  /** Agents whose sessions this replica holds now. */
  sessionsHeld(): number {
    return this.sessions.size;
  }

  isConnected(nodeId: string): boolean {
    return this.sessions.get(nodeId)?.ready === true;
  }

  /**
   * The node's agent, connected now, last reported `image` (under one of the
   * names a local copy is looked up by) among its images with no command. Only
   * the replica holding the agent's session knows; the others answer false, and
   * the node then fails the deployment with the same reason.
   */
  imageWithoutCommand(nodeId: string, image: string): boolean {
    const session = this.sessions.get(nodeId);
    return session?.ready === true && localImageCandidates(image).some((name) => session.imagesWithoutCommand.has(name));
  }

  /** Sends a frame on the node's control connection; false when it has none ready. */
  sendTo(nodeId: string, frame: ServerFrame): boolean {
    const s = this.sessions.get(nodeId);
    if (!s?.ready) return false;
    s.send(frame);
    return true;
  }

  /**
   * Up to when a connected node's running deployments may be billed by the
   * meter: its last proof of life whose every report has been handled (so a
   * stop still queued is never billed past); undefined without a session.
   */
  billableUntilMs(nodeId: string): number | undefined {
    const s = this.sessions.get(nodeId);
    return s?.ready ? s.billableUntilMs : undefined;
  }

  /** Up to when a deployment leaving running now is billed: now if all its agent said is handled. */
  settledThroughMs(nodeId: string, nowMs: number): number | undefined {
    const s = this.sessions.get(nodeId);
    return s?.ready ? s.settledThroughMs(nowMs) : undefined;
  }

  /** When the node's connected agent last proved it is alive (any frame); undefined without a session. */
  lastSeenMs(nodeId: string): number | undefined {
    const s = this.sessions.get(nodeId);
    return s?.ready ? s.lastSeenMs : undefined;
  }

  logBudget(nodeId: string): TokenBucket {
    let budget = this.logBudgets.get(nodeId);
    if (!budget) {
      budget = new TokenBucket(this.o.logIngestBytesPerS, LOG_BURST_S, this.o.clock.now());
      this.logBudgets.set(nodeId, budget);
    }
    return budget;
  }

  /** The node's last proof of life known here, connected or not. */
  lastProofOfLifeMs(nodeId: string): number | undefined {
    return this.lastSeenMs(nodeId) ?? this.lastSeenAway.get(nodeId);
  }

  /** Takes over an HTTP upgrade the server routed to AGENT_WS_PATH. */
  handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (this.closing) return void socket.destroy();
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const session = new AgentSession(ws, this.ctx);
      this.all.add(session);
      boundUntilReady(socket, head.length, session);
    });
  };

  adopt(session: AgentSession) {
    const old = this.sessions.get(session.nodeId);
    this.sessions.set(session.nodeId, session);
    if (old && old !== session) old.refuse(CLOSE_CODES.REPLACED, "REPLACED", "a newer connection with this node's token took over");
    this.directory(session.nodeId, "claim");
  }

  /** Records, in the node's turn, that this replica holds its session or no longer does. */
  private directory(nodeId: string, what: "claim" | "release") {
    const d = this.o.sessionDirectory;
    if (!d) return;
    void this.serialize(nodeId, async () => {
      // Released only if no newer session of the node's took over meanwhile.
      if (what === "release" && this.sessions.has(nodeId)) return;
      await d[what](nodeId);
    }).catch((err) => this.o.log.warn(`agent: could not ${what} the node's session for the other replicas`, { err, nodeId }));
  }

  onClosed(session: AgentSession) {
    this.all.delete(session);
    if (this.sessions.get(session.nodeId) !== session) return; // replaced, or never past hello
    this.sessions.delete(session.nodeId);
    this.lastSeenAway.set(session.nodeId, Math.max(session.lastSeenMs, this.lastSeenAway.get(session.nodeId) ?? 0));
    // A closed socket is not yet a lost node: an agent restarting, or a network
    // blip, reconnects within seconds and its containers never stopped (see
    // node-contact.ts). Nothing is charged past what the connection proved.
    this.connectionEnded(session);
    this.directory(session.nodeId, "release");
  }

  /** A connection of the node's begins: see NodeContact.connectionBegins. Called in the node's turn (serialize). */
  connectionBegins(nodeId: string): Promise<void> {
    return this.contact.connectionBegins(nodeId);
  }

  private connectionEnded(session: AgentSession) {
    void this.serialize(session.nodeId, () => this.contact.connectionEnded(session.nodeId, session.billableUntilMs)).catch((err) =>
      this.o.log.error("agent: pausing the charges of a node whose connection ended failed", { err, nodeId: session.nodeId }),
    );
  }

  /**
   * Shows a node offline at once when its agent cannot take what it is sent,
   * instead of online while it reconnects and fails again; its next hello, told
   * only what it reads, brings it back. Its containers are left as they are.
   */
  notServing(nodeId: string, why: string) {
    void this.serialize(nodeId, async () => {
      if (this.sessions.has(nodeId)) return; // already back
      await this.o.repos.nodes.markOffline(nodeId);
      this.o.events.emit("node-changed", nodeId);
      this.o.log.error(`node not serving: ${why}`, { nodeId });
    }).catch((err) => this.o.log.error("agent: marking a node not serving failed", { err, nodeId }));
  }

  serialize<T>(nodeId: string, fn: () => Promise<T>): Promise<T> {
    return this.presence.run(nodeId, fn);
  }

  templateNeeds(): Promise<ReadonlyMap<string, TemplateNeeds>> {
    this.templates ??= this.o.repos.templates.list({}).then((rows) => new Map(rows.map((t) => [t.id, { requiresGpu: t.requiresGpu, minDiskGb: t.minDiskGb }])));
    return this.templates.catch((err) => {
      this.templates = undefined;
      throw err;
    });
  }

  /** Marks silent nodes offline: no heartbeat for more than three intervals. Ticks run one at a time. */
  tick(): Promise<void> {
    return this.checks.run("heartbeats", () => this.silence.check()).catch((err) => this.o.log.error("agent: heartbeat check failed", { err }));
  }

  start() {
    if (this.timers.length > 0) return;
    this.silence.start();
    const every = (job: PeriodicJob, ms: number, fn: () => unknown) => this.timers.push(this.o.periodic.clockFor(job).every(ms, () => void fn()));
    every("offline-monitor", this.o.heartbeatIntervalMs, () => this.tick());
    every("heartbeat-flush", this.o.heartbeatFlushMs, () => this.heartbeats.flush());
    const sweep = () => this.checks.run("sweep", () => this.sweep.sweep()).catch((err) => this.o.log.error("agent: the command sweep failed", { err }));
    if (this.o.commandSweepMs) every("command-sweep", this.o.commandSweepMs, sweep);
  }

  /** Closes every agent connection (going away) without marking any node offline. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const stop of this.timers) stop();
      this.silence.stop();
      await Promise.all([...this.all].map((s) => s.shutdown(CLOSE_CODES.GOING_AWAY, "the control plane is restarting", 1000)));
      await this.checks.idle();
      await this.heartbeats.flush();
      await this.presence.idle();
      this.wss.close();
    })();
    return this.closing;
  }

  /**
   * Stops the node's deployments while its session is still the node's, so the
   * agent gets a stop command for each (and ships their last lines), then tells
   * it to drain: it removes their containers and its sandboxes and closes. The
   * session is no longer the node's meanwhile: nothing new is sent to it.
   */
  private async retired(nodeId: string) {
    await this.serialize(nodeId, async () => {
      const s = this.sessions.get(nodeId);
      // Away when retired: its deployments ran no later than its last proof of life.
      const node = await this.o.repos.nodes.get(nodeId, { includeRetired: true });
      await this.contact.retired(nodeId, this.lastAliveMs(nodeId, s, node?.lastHeartbeat) || this.o.clock.now());
      if (s && this.sessions.get(nodeId) === s) {
        this.sessions.delete(nodeId);
        s.retire(RETIRE_DRAIN_MS);
      }
    });
  }

  /** The last instant the node is known alive: its session's last frame, one remembered from a closed session, or its stored heartbeat; 0 when none. */
  private lastAliveMs(nodeId: string, s: AgentSession | undefined, lastHeartbeat: number | null | undefined): number {
    return Math.max(lastHeartbeat ?? 0, s?.lastSeenMs ?? 0, this.lastSeenAway.get(nodeId) ?? 0);
  }
}
