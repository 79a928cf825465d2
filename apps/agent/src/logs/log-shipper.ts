// Ships one container's log to the control plane: polls its log source for the
// lines after the cursor (see log-source.ts), numbers them, sends them in `logs`
// frames, and stops polling while too many lines are unacknowledged. Lives for
// one connection: after a reconnect a new shipper resumes from the cursor the
// control plane acknowledged.
import type { LogCursor, LogLineFrame } from "@cm/protocol";
import type { Clock, TimerHandle } from "../clock";
import type { Logger } from "../logger";
import type { LogClient } from "../runtime/container-runtime";
import { ContainerNotFoundError } from "../runtime/errors";
import type { LogLine } from "../runtime/types";
import { openLogSource } from "./log-source";
import type { LogSource } from "./log-source";

export interface LogShipperOptions {
  deploymentId: string;
  containerId: string;
  /** the container's json-file, read directly when the agent may */
  logPath: string | null;
  /** the last line the control plane has; shipping starts after it */
  cursor: LogCursor;
  runtime: LogClient;
  /** false when the connection is not ready: the shipper then stops */
  send(frame: { type: "logs"; deploymentId: string; lines: LogLineFrame[] }): boolean;
  clock: Clock;
  logger: Logger;
  batchLines: number;
  maxInflightLines: number;
  /** between polls while lines keep coming */
  pollMs: number;
  /** polls back off to this while the container is quiet */
  idlePollMaxMs: number;
  /** the largest frame the control plane reads (from welcome), when it said */
  maxFrameBytes?: () => number | undefined;
}

/** Frames stay this small even when the control plane would read bigger ones. */
const MAX_FRAME_BYTES = 512 * 1024;
/** a line's JSON beyond its message: seq, ts, stream and the keys */
const LINE_OVERHEAD_BYTES = 96;
const FRAME_OVERHEAD_BYTES = 256;
const MAX_MESSAGE_CHARS = 64 * 1024;

export class LogShipper {
  private sent: LogCursor;
  private ackedSeq: number;
  private source: LogSource | undefined;
  private idleDelayMs: number;
  private timer: TimerHandle | undefined;
  private polling = false;
  private paused = false;
  private finishing = false;
  private closed = false;
  private resolveDone!: () => void;
  /** Settles when the log was sent to its end after finish(), or stop() was called. */
  readonly done = new Promise<void>((resolve) => (this.resolveDone = resolve));

  constructor(private readonly options: LogShipperOptions) {
    this.sent = options.cursor;
    this.ackedSeq = options.cursor.seq;
    this.idleDelayMs = options.pollMs;
  }

  get containerId(): string {
    return this.options.containerId;
  }

  /** The last line sent (not necessarily acknowledged). */
  get lastSent(): LogCursor {
    return this.sent;
  }

  get finished(): boolean {
    return this.closed;
  }

  start(): void {
    this.schedule(0);
  }

  /** Where the lines come from, once the first poll has chosen. */
  get sourceKind(): LogSource["kind"] | undefined {
    return this.source?.kind;
  }

  /** The container has ended: send what is left, then settle `done`. */
  finish(): void {
    if (this.finishing || this.closed) return;
    this.finishing = true;
    if (!this.polling && !this.paused) this.schedule(0);
  }

  onAck(cursor: LogCursor): void {
    if (cursor.seq <= this.ackedSeq) return;
    this.ackedSeq = cursor.seq;
    if (this.paused && !this.closed && this.sent.seq - this.ackedSeq <= this.options.maxInflightLines / 2) {
      this.paused = false;
      this.schedule(0);
    }
  }

  /** Stops polling; what was not sent is read again by the next shipper. */
  stop(): void {
    if (this.closed) return;
    this.closed = true;
    this.options.clock.clearTimeout(this.timer);
    void this.source?.close();
    this.resolveDone();
  }

  private schedule(delayMs: number): void {
    this.options.clock.clearTimeout(this.timer);
    this.timer = this.options.clock.setTimeout(() => void this.poll(), delayMs);
  }

  private async poll(): Promise<void> {
    if (this.closed || this.polling) return;
    this.polling = true;
    let lines: LogLine[];
    try {
      lines = await this.readNew();
    } catch (error) {
      if (error instanceof ContainerNotFoundError) return this.stop();
      this.options.logger.warn("Cannot read a container's log; trying again", { deploymentId: this.options.deploymentId, error });
      lines = [];
    } finally {
      this.polling = false;
    }
    if (this.closed) return;
    if (lines.length > 0) this.ship(lines);
    if (this.closed || this.paused) return;
    if (lines.length === 0 && this.finishing) return this.stop();
    if (lines.length > 0) this.idleDelayMs = this.options.pollMs;
    else this.idleDelayMs = Math.min(this.options.idlePollMaxMs, this.idleDelayMs * 2);
    // A full window means the container outpaces the polls: read again at once.
    this.schedule(lines.length >= this.options.batchLines ? 0 : lines.length > 0 ? this.options.pollMs : this.idleDelayMs);
  }

  private async readNew(): Promise<LogLine[]> {
    const { containerId, logPath, runtime, logger } = this.options;
    this.source ??= await openLogSource({ containerId, logPath }, runtime, logger);
    if (this.closed) {
      await this.source.close(); // stopped while the source opened
      return [];
    }
    return this.source.readNew(this.sent);
  }

  private ship(lines: LogLine[]): void {
    const announced = this.options.maxFrameBytes?.();
    const budget = Math.max(1, Math.min(MAX_FRAME_BYTES, announced === undefined ? Infinity : Math.floor(announced * 0.9)) - FRAME_OVERHEAD_BYTES);
    let batch: LogLineFrame[] = [];
    let batchBytes = 0;
    let seq = this.sent.seq;
    const flush = () => {
      if (batch.length === 0 || this.closed) return;
      if (!this.options.send({ type: "logs", deploymentId: this.options.deploymentId, lines: batch })) {
        this.options.logger.debug("Not connected: log shipping stops until the next sync", { deploymentId: this.options.deploymentId });
        return this.stop();
      }
      const last = batch[batch.length - 1]!;
      this.sent = { seq: last.seq, dockerTs: last.ts };
      batch = [];
      batchBytes = 0;
    };
    const full = () => seq - this.ackedSeq >= this.options.maxInflightLines;
    for (const line of lines) {
      // The lines not sent now are read again once the control plane has caught up.
      if (full()) break;
      const { message, bytes } = fitMessage(line.message, budget - LINE_OVERHEAD_BYTES);
      if (batchBytes + bytes + LINE_OVERHEAD_BYTES > budget) flush();
      if (this.closed) return;
      batch.push({ seq: ++seq, ts: line.dockerTimestamp || line.timestamp, stream: line.stream, message });
      batchBytes += bytes + LINE_OVERHEAD_BYTES;
      if (batch.length >= this.options.batchLines || full()) flush();
      if (this.closed) return;
    }
    flush();
    if (!this.closed && this.sent.seq - this.ackedSeq >= this.options.maxInflightLines) {
      this.options.logger.debug("Log shipping waits for the control plane to catch up", { deploymentId: this.options.deploymentId, unacked: this.sent.seq - this.ackedSeq });
      this.paused = true;
    }
  }
}

/** The message cut to the wire's 64 Ki characters and to what fits a frame, with its size as JSON. */
function fitMessage(text: string, maxBytes: number): { message: string; bytes: number } {
  let message = text.length > MAX_MESSAGE_CHARS ? text.slice(0, MAX_MESSAGE_CHARS) : text;
  let bytes = Buffer.byteLength(JSON.stringify(message));
  while (bytes > maxBytes && message.length > 0) {
    message = message.slice(0, Math.floor((message.length * maxBytes) / bytes) - 1);
    bytes = Buffer.byteLength(JSON.stringify(message));
  }
  return { message, bytes };
}
