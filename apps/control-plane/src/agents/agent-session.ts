import type { DeploymentRow } from "@cm/db";
import {
  AGENT_MAX_INBOUND_FRAME_BYTES,
  AgentFrame,
  CLOSE_CODES,
  type DeploymentSpec,
  KeyedQueue,
  PROTOCOL_VERSIONS,
  parseFrame,
  retiredCloseReason,
  type ServerFrame,
} from "@cm/protocol";
import WebSocket, { type RawData } from "ws";
import { hashSecret } from "../services/ids";
import type { Logger } from "../services/logger";
import type { AgentContext } from "./agent-context";
import { handleFrame } from "./frame-handlers";
import { sendChange, sendSync } from "./session-sends";

type HelloFrame = Extract<AgentFrame, { type: "hello" }>;
type State = "awaiting-hello" | "authenticating" | "ready" | "closed";

/** Bad frames tolerated before the connection is closed: a confused agent gets told, a hostile one cut off. */
const MAX_BAD_FRAMES = 20;
// Frames waiting to be processed: past PAUSE_AT the socket stops reading, so a
// flood of logs cannot grow memory without bound.
const PAUSE_AT = 64;
const RESUME_AT = 8;
/** Frames whose database writes are retried (every OUTAGE_RETRY_MS, in order) while the database cannot be reached. */
const KEPT_THROUGH_OUTAGES: ReadonlySet<AgentFrame["type"]> = new Set(["hello", "status", "specs", "endpoints"]);
const OUTAGE_RETRY_MS = 500;
/** The close code a `ws` peer sends when a frame exceeds its maxPayload. */
const MESSAGE_TOO_BIG = 1009;

/**
 * One agent connection: the hello handshake, then frames in arrival order.
 * Everything sent to the agent after the sync goes through one queue, so a
 * command never overtakes the sync or an earlier command.
 */
export class AgentSession {
  state: State = "awaiting-hello";
  nodeId = "";
  /** The hub's logger until hello names the node, then one that puts its nodeId on every line. */
  log: Logger;
  /** When the last frame arrived (any frame proves the agent alive), by the control plane's clock: where charges end if the node is lost. */
  lastSeenMs = 0;
  /**
   * The agent proved its containers ran until this instant (a heartbeat's
   * sentAt, never later than it arrived), counted only once every status
   * report it sent before that heartbeat has been handled: the meter bills no further, so
   * a stop report still waiting behind a slow database write, or read late
   * after a stall, is never billed past.
   */
  billableUntilMs = 0;
  /** specKey of every deployment this agent has been told about. */
  readonly known = new Map<string, string>();
  /** When each deployment's pull progress was last written. */
  readonly pullNotedAt = new Map<string, number>();
  /** The local images with neither CMD nor ENTRYPOINT, as the agent's last specs said. */
  imagesWithoutCommand: ReadonlySet<string> = new Set();
  /** The largest frame the agent reads, as its hello said. */
  agentMaxFrameBytes = AGENT_MAX_INBOUND_FRAME_BYTES;
  /** The latest heartbeat proof waiting for the status reports queued before it (see billableUntilMs). */
  private pendingProofMs = 0;
  private badFrames = 0;
  private queued = 0;
  /** Status reports among the frames queued: only they can say a container stopped earlier than now. */
  private reportsQueued = 0;
  private wasReady = false;
  /** When reading resumed after back-pressure paused the socket: unread time is not the agent's silence. */
  private readingSinceMs = 0;
  private abandoned = false;
  /** Frames from the agent are handled in arrival order ("inbound"); what is sent to it, in order too ("outbound"). */
  private readonly queues = new KeyedQueue<"inbound" | "outbound">();
  private readonly helloTimer: NodeJS.Timeout;

  constructor(
    private readonly ws: WebSocket,
    readonly ctx: AgentContext,
  ) {
    this.log = ctx.log;
    this.helloTimer = setTimeout(() => this.refuse(CLOSE_CODES.HELLO_TIMEOUT, "HELLO_TIMEOUT", `no hello within ${ctx.helloTimeoutMs} ms`), ctx.helloTimeoutMs);
    ws.on("message", (data, isBinary) => this.receive(data, isBinary));
    ws.on("close", (code) => this.closed(code));
    ws.on("error", (err) => this.log.debug("agent socket error", { err }));
  }

  get ready() {
    return this.state === "ready";
  }

  /**
   * The latest instant this agent is known alive, for judging it: its last
   * frame, or now while this side is not reading the socket (nobody can tell).
   */
  livenessMs(nowMs: number): number {
    return this.ws.isPaused ? nowMs : Math.max(this.lastSeenMs, this.readingSinceMs);
  }

  /** Up to when a deployment leaving running now is billed: now when every status report received is handled, else as far as proven. */
  settledThroughMs(nowMs: number): number {
    return this.reportsQueued === 0 ? nowMs : this.billableUntilMs;
  }

  /** A method, not a field read, so the compiler does not assume the state stood still across an await. */
  isClosed() {
    return this.state === "closed";
  }

  /**
   * Sends a frame the agent can read; false, sending nothing, for one larger than
   * its limit (which would make it close the connection and fail again at every
   * reconnect) or when the socket is not open.
   */
  send(frame: ServerFrame): boolean {
    if (this.ws.readyState !== WebSocket.OPEN) return false;
    const text = JSON.stringify(frame);
    const bytes = Buffer.byteLength(text);
    if (bytes > this.agentMaxFrameBytes) {
      this.log.error("agent: a frame larger than the agent reads was not sent", { type: frame.type, bytes, limit: this.agentMaxFrameBytes });
      return false;
    }
    this.ws.send(text);
    return true;
  }

  close(code: number, reason: string) {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.close(code, reason.slice(0, 120));
  }

  terminate() {
    this.ws.terminate();
  }

  /** Closes, then waits for the socket and the frames in flight; a peer that does not answer is cut after graceMs. */
  async shutdown(code: number, reason: string, graceMs: number) {
    this.abandoned = true;
    if (this.ws.readyState !== WebSocket.CLOSED) {
      await new Promise<void>((resolve) => {
        const cut = setTimeout(() => this.ws.terminate(), graceMs);
        this.ws.once("close", () => {
          clearTimeout(cut);
          resolve();
        });
        this.close(code, reason);
      });
    }
    await this.queues.idle();
  }

  /**
   * The node was retired: after the commands already queued (its deployments'
   * stops), tells the agent to drain, and gives it drainMs to ship their last
   * log lines and close before closing with RETIRED.
   */
  retire(drainMs: number) {
    this.enqueueOut(async () => {
      this.send({ type: "retired", message: `node ${this.nodeId} was retired by its operator` });
    });
    setTimeout(() => this.close(CLOSE_CODES.RETIRED, retiredCloseReason(this.nodeId)), drainMs).unref();
  }

  /** An error frame, then the close code that tells the agent whether retrying can help. */
  refuse(closeCode: number, code: string, message: string) {
    this.send({ type: "error", code, message });
    this.close(closeCode, message);
  }

  bad(message: string) {
    this.badFrames++;
    this.send({ type: "error", code: "BAD_FRAME", message });
    if (this.badFrames >= MAX_BAD_FRAMES) this.close(CLOSE_CODES.BAD_FRAMES, `${this.badFrames} bad frames`);
  }

  /** Tells the agent about a change, unless it already knows this desired state. */
  onDeploymentChanged(dep: DeploymentRow) {
    if (!this.ready) return; // the sync, read after the session became ready, carries it
    this.enqueueOut(() => sendChange(this, dep));
  }

  private enqueueOut(fn: () => Promise<void>) {
    void this.queues.run("outbound", fn).catch((err) => this.log.error("agent: sending to the agent failed", { err }));
  }

  private receive(data: RawData, isBinary: boolean) {
    if (this.state === "closed") return;
    if (isBinary) return this.bad("binary frames are not spoken here: send JSON text frames");
    const parsed = parseFrame(AgentFrame, data.toString());
    if (!parsed.ok) return this.bad(parsed.error);
    const frame = parsed.frame;
    if (frame.type === "hello") {
      if (this.state !== "awaiting-hello") return this.bad("hello was already received");
      this.state = "authenticating";
    } else if (this.state === "awaiting-hello") {
      return this.bad("the first frame must be hello");
    }
    const receivedAtMs = this.ctx.clock.now();
    if (this.state === "ready") this.lastSeenMs = receivedAtMs;
    if (frame.type === "heartbeat" && this.state === "ready") {
      // Liveness never waits on the database, nor behind frames that do; the
      // billing proof it carries takes its turn behind them.
      this.ctx.hub.heartbeats.note(this.nodeId, receivedAtMs);
      const provenMs = Math.min(receivedAtMs, frame.sentAt);
      // One number, not a promise per heartbeat: heartbeats are not paused by back-pressure.
      if (this.reportsQueued === 0) this.billableUntilMs = Math.max(this.billableUntilMs, provenMs);
      else this.pendingProofMs = Math.max(this.pendingProofMs, provenMs);
      return;
    }
    const report = frame.type === "status";
    if (report) this.reportsQueued++;
    if (++this.queued > PAUSE_AT) this.ws.pause();
    void this.queues.run("inbound", async () => {
      try {
        await this.handle(frame);
      } finally {
        if (report && --this.reportsQueued === 0) {
          // Every report sent before the heartbeats that came meanwhile is handled: their proof counts now.
          this.billableUntilMs = Math.max(this.billableUntilMs, this.pendingProofMs);
        }
        if (--this.queued <= RESUME_AT && this.ws.isPaused) {
          this.ws.resume();
          this.readingSinceMs = this.ctx.clock.now();
        }
      }
    });
  }

  private async handle(frame: AgentFrame) {
    // Frames queued behind a hello that was refused are dropped with the
    // connection; those of an agent that was here are handled even if its socket
    // closed meanwhile: they say what happened on the node.
    if (frame.type === "hello" ? this.state === "closed" : !this.wasReady) return;
    for (;;) {
      if (frame.type === "hello" && this.isClosed()) return; // gave up waiting for its welcome
      try {
        if (frame.type === "hello") await this.hello(frame);
        else await handleFrame(this, frame);
        return;
      } catch (err) {
        const unreachable = this.ctx.dbHealth.noteError(err);
        // What happened on the node waits for the database rather than being lost;
        // logs are resent by the agent from its acknowledged cursor.
        if (unreachable && KEPT_THROUGH_OUTAGES.has(frame.type) && !this.abandoned) {
          await new Promise((r) => setTimeout(r, OUTAGE_RETRY_MS));
          continue;
        }
        this.log.error("agent: frame failed", { type: frame.type, err });
        this.send({ type: "error", code: "INTERNAL_ERROR", message: `the ${frame.type} frame could not be processed; send it again later` });
        return;
      }
    }
  }

  private async hello(f: HelloFrame) {
    const { repos, clock, events, hub } = this.ctx;
    const node = await repos.nodes.byAgentTokenHash(hashSecret(f.token), { includeRetired: true });
    if (!node) return this.refuse(CLOSE_CODES.UNAUTHORIZED, "UNAUTHORIZED", "unknown node token");
    // Retired while its agent was away: told so (not "bad token"), the agent removes what it ran and stops.
    if (node.retiredAt !== null) return this.refuse(CLOSE_CODES.RETIRED, "NODE_RETIRED", retiredCloseReason(node.id));
    const version = f.protocolVersions.reduce((best, v) => ((PROTOCOL_VERSIONS as readonly number[]).includes(v) && v > best ? v : best), -1);
    if (version < 0) {
      return this.refuse(
        CLOSE_CODES.UNSUPPORTED_PROTOCOL,
        "UNSUPPORTED_PROTOCOL",
        `this control plane speaks protocol versions ${PROTOCOL_VERSIONS.join(", ")}; upgrade the agent`,
      );
    }
    clearTimeout(this.helloTimer);
    this.nodeId = node.id;
    this.log = this.ctx.log.child({ nodeId: node.id });
    this.agentMaxFrameBytes = f.maxFrameBytes ?? AGENT_MAX_INBOUND_FRAME_BYTES;
    await hub.serialize(node.id, async () => {
      if (this.state === "closed") return;
      hub.adopt(this);
      await hub.connectionBegins(node.id);
      this.lastSeenMs = clock.now();
      await repos.nodes.markOnline(node.id, this.lastSeenMs, f.agentVersion);
      events.emit("node-changed", node.id);
      if (this.isClosed()) return; // gone meanwhile: the hub has queued the node's loss behind this
      this.send({
        type: "welcome",
        protocolVersion: version,
        nodeId: node.id,
        heartbeatIntervalMs: this.ctx.heartbeatIntervalMs,
        serverTime: clock.now(),
        maxFrameBytes: this.ctx.maxFrameBytes,
      });
      this.state = "ready";
      this.wasReady = true;
      this.enqueueOut(() => sendSync(this));
    });
    this.log.info("agent connected", { agentVersion: f.agentVersion, protocolVersion: version });
  }

  private closed(code: number) {
    if (this.state === "closed") return;
    // The agent could not read a frame this side sent: it is not being told what
    // to run, so it does not serve until it reconnects and is sent what it reads.
    if (code === MESSAGE_TOO_BIG && this.wasReady) this.ctx.hub.notServing(this.nodeId, "the agent closed its connection on a frame larger than it reads");
    this.state = "closed";
    clearTimeout(this.helloTimer);
    this.ctx.hub.onClosed(this);
  }
}
