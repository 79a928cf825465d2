// The agent's one WebSocket to the control plane, as an explicit state machine
// (after liveblocks' connection.ts):
//
//   disconnected --start--> connecting --open--> authenticating --welcome--> ready
//        ^                      |                     |                      |
//        |                      +-------- close / timeout / dead ------------+--> backoff --timer--> connecting
//        +-- stop() from any state                                   fatal close code --> failed
//
// The connection owns only transport concerns: hello, heartbeats, liveness,
// backoff, parsing. What the frames mean is the agent's business.

import { AGENT_MAX_INBOUND_FRAME_BYTES, AgentFrame, CLOSE_CODES, clampToSchema, PROTOCOL_VERSIONS, RETRYABLE_CLOSE } from "@cm/protocol";
import type { TimerHandle } from "../clock";
import { backoffDelayMs } from "./backoff";
import { explainFatalClose } from "./close-codes";
import { parseIncoming } from "./incoming";
import { Liveness } from "./liveness";
import { Outbox } from "./outbox";
import type { AgentSocket } from "./socket";
import type { ConnectionHandlers, ConnectionOptions, ConnectionState, Welcome } from "./types";

export type { ConnectionFailure, ConnectionHandlers, ConnectionOptions, ConnectionState, Welcome } from "./types";

const CLOSE_WAIT_MS = 2_000;

export class Connection {
  private current: ConnectionState = "disconnected";
  private socket: AgentSocket | undefined;
  private attempt = 0;
  private stopping = false;
  private timers: Partial<Record<"backoff" | "hello" | "heartbeat" | "stable", TimerHandle>> = {};
  private liveness: Liveness | undefined;
  private readonly outbox: Outbox;
  private readonly listeners = new Set<(state: ConnectionState) => void>();
  private welcomeFrame: Welcome | undefined;
  /** the socket's last error, e.g. "connect ECONNREFUSED", for the reconnect log line */
  private lastError: string | undefined;

  constructor(
    private readonly options: ConnectionOptions,
    private readonly handlers: ConnectionHandlers,
  ) {
    this.outbox = new Outbox(options.outboxMaxFrames ?? 1_000);
  }

  get state(): ConnectionState {
    return this.current;
  }

  /** The welcome of the current ready connection. */
  get welcome(): Welcome | undefined {
    return this.current === "ready" ? this.welcomeFrame : undefined;
  }

  onStateChange(listener: (state: ConnectionState) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  start(): void {
    if (this.current !== "disconnected" && this.current !== "failed") return;
    this.stopping = false;
    this.attempt = 0;
    this.connect();
  }

  /** Closes with CLOSE_CODES.GOING_AWAY and stops retrying. Resolves once the socket is closed. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.clearTimers();
    const socket = this.socket;
    if (socket && socket.readyState !== socket.CLOSED) {
      const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
      try {
        socket.close(CLOSE_CODES.GOING_AWAY, "agent shutting down");
      } catch {
        socket.terminate();
      }
      const timer = this.options.clock.setTimeout(() => socket.terminate(), CLOSE_WAIT_MS);
      await closed;
      this.options.clock.clearTimeout(timer);
    }
    this.socket = undefined;
    this.setState("disconnected");
  }

  /** Sends now if ready; returns false (and drops the frame) otherwise. */
  send(frame: AgentFrame): boolean {
    const socket = this.socket;
    if (this.current !== "ready" || !socket || socket.readyState !== socket.OPEN) return false;
    write(socket, frame);
    return true;
  }

  /** Sends now, or after the next welcome: for reports that must not be lost. */
  sendReliable(frame: AgentFrame): void {
    if (!this.send(frame)) this.outbox.push(frame);
  }

  /** Bytes queued in the socket, not yet written to the network. */
  get bufferedBytes(): number {
    return this.socket?.bufferedAmount ?? 0;
  }

  private connect(): void {
    this.setState("connecting");
    let socket: AgentSocket;
    try {
      socket = this.options.socketFactory(this.options.url);
    } catch (error) {
      this.scheduleReconnect(`cannot open a WebSocket to ${this.options.url}: ${(error as Error).message}`);
      return;
    }
    this.socket = socket;
    // Events of a socket that was replaced (closed late, say) must not touch the new one.
    const current = () => this.socket === socket;
    socket.on("open", () => current() && this.onOpen(socket));
    socket.on("message", (data, isBinary) => current() && this.onMessage(socket, data, isBinary));
    socket.on("pong", () => current() && this.liveness?.alive());
    socket.on("error", (error) => {
      if (current()) this.lastError = error.message;
    });
    socket.on("close", (code, reason) => current() && this.onClose(code, reason.toString()));
  }

  private onOpen(socket: AgentSocket): void {
    this.setState("authenticating");
    this.liveness = new Liveness({
      ...this.options.timing,
      clock: this.options.clock,
      ping: () => socket.ping(),
      onDead: () => {
        this.options.logger.warn("No answer to ping: the connection is half-open; reconnecting", { pongTimeoutMs: this.options.timing.pongTimeoutMs });
        socket.terminate();
      },
    });
    this.liveness.start();
    this.timers.hello = this.options.clock.setTimeout(() => {
      this.options.logger.warn("No welcome from the control plane in time; reconnecting", { helloTimeoutMs: this.options.timing.helloTimeoutMs });
      socket.terminate();
    }, this.options.timing.helloTimeoutMs);
    write(socket, {
      type: "hello",
      token: this.options.token,
      agentVersion: this.options.agentVersion,
      protocolVersions: [...PROTOCOL_VERSIONS],
      maxFrameBytes: AGENT_MAX_INBOUND_FRAME_BYTES,
    });
  }

  private onMessage(socket: AgentSocket, data: Parameters<typeof parseIncoming>[0], isBinary: boolean): void {
    this.liveness?.alive();
    const parsed = parseIncoming(data, isBinary);
    if (!parsed.ok) {
      this.options.logger.warn("Ignoring a frame from the control plane that does not parse", { error: parsed.error });
      if (socket.readyState === socket.OPEN) write(socket, { type: "error", code: "BAD_FRAME", message: parsed.error });
      return;
    }
    const frame = parsed.frame;
    if (frame.type === "error") {
      this.options.logger.warn("The control plane reported an error", { code: frame.code, message: frame.message });
    }
    if (frame.type === "welcome") {
      this.onWelcome(socket, frame);
      return;
    }
    if (this.current === "ready") this.handlers.onFrame(frame);
    else if (frame.type !== "error") this.options.logger.warn("Ignoring a frame that came before welcome", { type: frame.type });
  }

  private onWelcome(socket: AgentSocket, welcome: Welcome): void {
    if (this.current !== "authenticating") {
      this.options.logger.warn("Ignoring a second welcome");
      return;
    }
    if (!(PROTOCOL_VERSIONS as readonly number[]).includes(welcome.protocolVersion)) {
      this.options.logger.error("The control plane chose a protocol version this agent does not speak", {
        chosen: welcome.protocolVersion,
        ours: PROTOCOL_VERSIONS,
      });
      socket.close(CLOSE_CODES.UNSUPPORTED_PROTOCOL, "unsupported protocol version");
      return;
    }
    this.options.clock.clearTimeout(this.timers.hello);
    this.welcomeFrame = welcome;
    this.setState("ready");
    this.options.logger.info("Connected to the control plane", { nodeId: welcome.nodeId, protocolVersion: welcome.protocolVersion });
    this.timers.stable = this.options.clock.setTimeout(() => (this.attempt = 0), this.options.timing.stableConnectionMs);
    const { frames, dropped } = this.outbox.drain();
    if (dropped > 0) this.options.logger.warn("Some status reports were dropped while disconnected", { dropped });
    for (const frame of frames) this.send(frame);
    this.scheduleHeartbeat(welcome.heartbeatIntervalMs);
    this.handlers.onReady(welcome);
  }

  private scheduleHeartbeat(intervalMs: number): void {
    this.timers.heartbeat = this.options.clock.setTimeout(() => {
      this.send({ type: "heartbeat", sentAt: this.options.clock.now(), running: this.handlers.runningDeployments() });
      this.scheduleHeartbeat(intervalMs);
    }, intervalMs);
  }

  private onClose(code: number, reason: string): void {
    const wasReady = this.current === "ready";
    const lastError = this.lastError;
    this.lastError = undefined;
    this.socket = undefined;
    this.clearTimers();
    if (wasReady) this.handlers.onDown();
    if (this.stopping) {
      this.setState("disconnected");
      return;
    }
    if (!RETRYABLE_CLOSE(code)) {
      const explanation = explainFatalClose(code, reason);
      this.options.logger.error(`Not reconnecting: ${explanation}`, { closeCode: code });
      this.setState("failed");
      this.handlers.onFailed({ closeCode: code, reason, explanation });
      return;
    }
    const why = reason ? `closed with ${code}: ${reason}` : (lastError ?? `closed with ${code}`);
    this.scheduleReconnect(wasReady ? `disconnected from the control plane (${why})` : `cannot reach the control plane at ${this.options.url} (${why})`);
  }

  private scheduleReconnect(why: string): void {
    const { backoffInitialMs: initialMs, backoffMaxMs: maxMs } = this.options.timing;
    const delayMs = backoffDelayMs(this.attempt, { initialMs, maxMs }, this.options.random ?? Math.random);
    this.attempt += 1;
    this.setState("backoff");
    this.options.logger.warn(`${why[0]!.toUpperCase()}${why.slice(1)}; retrying in ${delayMs} ms`, { attempt: this.attempt });
    this.timers.backoff = this.options.clock.setTimeout(() => {
      if (!this.stopping) this.connect();
    }, delayMs);
  }

  private clearTimers(): void {
    for (const timer of Object.values(this.timers)) this.options.clock.clearTimeout(timer);
    this.timers = {};
    this.liveness?.stop();
    this.liveness = undefined;
  }

  private setState(next: ConnectionState): void {
    if (next === this.current) return;
    this.options.logger.debug("Connection state", { from: this.current, to: next });
    this.current = next;
    for (const listener of this.listeners) listener(next);
  }
}

/**
 * Every frame the agent sends goes out here, each string clamped to its field's limit: text
 * from a registry, Docker or a container must never make the control plane refuse a report.
 */
function write(socket: AgentSocket, frame: AgentFrame): void {
  socket.send(JSON.stringify(clampToSchema(AgentFrame, frame)));
}
