// Ships one container's log to the control plane: polls its log source for the
// lines after the cursor (see log-source.ts), numbers them, sends them in `logs`
// frames, and stops polling while too many lines are unacknowledged. Lives for
// one connection: after a reconnect a new shipper resumes from the cursor the
// control plane acknowledged.
//
// The control plane answers every logs frame, in the order it got them, with a
// logs_ack for that frame's last line or with an error ("send it again later",
// during a database outage). So acks are never cumulative: an ack answering a
// send means every send before it that is still unanswered was refused, and
// those batches are sent again at once. When nothing is answered for
// ackTimeoutMs the oldest batch alone is sent again as a probe (the control
// plane may only be slow: one batch twice costs nothing, as it stores lines by
// number), doubling the wait while nothing is answered, and no new lines go out
// until something is. Every batch is kept until its own ack, and what is
// unacknowledged when the shipper stops goes to the next one.
import { cutOnWholeCharacters, type LogCursor, type LogLineFrame } from "@cm/protocol";
import type { Clock, TimerHandle } from "../clock";
import type { Logger } from "../logger";
import type { LogClient } from "../runtime/container-runtime";
import { ContainerNotFoundError } from "../runtime/errors";
import type { LogLine } from "../runtime/types";
import type { LogSource } from "./log-source";
import { openLogSource } from "./log-source";

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
  /** a batch unanswered this long is sent again */
  ackTimeoutMs: number;
  /** batches an earlier shipper of this deployment sent and never saw acknowledged: sent first */
  resend?: LogLineFrame[][];
  /** called once, when the shipper stops, with the batches still unacknowledged */
  onClose?: (unacked: LogLineFrame[][]) => void;
}

/** A batch sent and not yet acknowledged, with its sends still unanswered (numbered in send order, oldest first). */
interface Unacked {
  lines: LogLineFrame[];
  sends: number[];
}

/** Frames stay this small even when the control plane would read bigger ones. */
const MAX_FRAME_BYTES = 512 * 1024;
/** a line's JSON beyond its message: seq, ts, stream and the keys */
const LINE_OVERHEAD_BYTES = 96;
const FRAME_OVERHEAD_BYTES = 256;
const MAX_MESSAGE_CHARS = 64 * 1024;
/** resends of unanswered batches back off to this while the control plane answers none */
const MAX_RESEND_DELAY_MS = 60_000;

export class LogShipper {
  private sent: LogCursor;
  /** in seq order */
  private readonly unacked: Unacked[] = [];
  private sends = 0;
  private resendDelayMs: number;
  private resendTimer: TimerHandle | undefined;
  /** nothing was answered within the ack timeout: send no new lines until something is */
  private probing = false;
  private source: LogSource | undefined;
  private idleDelayMs: number;
  private timer: TimerHandle | undefined;
  private polling = false;
  private paused = false;
  private finishing = false;
  /** finishing, and the source had nothing more */
  private drained = false;
  /** finished: everything to the end was acknowledged */
  private completed = false;
  private closed = false;
  private resolveDone!: () => void;
  /** Settles when the log was sent to its end after finish(), or stop() was called. */
  readonly done = new Promise<void>((resolve) => (this.resolveDone = resolve));
  /** every line about this deployment's log carries its id */
  private readonly log: Logger;

  constructor(private readonly options: LogShipperOptions) {
    this.log = options.logger.child({ deploymentId: options.deploymentId });
    this.sent = options.cursor;
    this.idleDelayMs = options.pollMs;
    this.resendDelayMs = options.ackTimeoutMs;
  }

  /** The last line before the first one not acknowledged: never moved past a refused batch. */
  private get ackedSeq(): number {
    const oldest = this.unacked[0]?.lines[0];
    return oldest ? oldest.seq - 1 : this.sent.seq;
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

  /** Stopped after finish() because the control plane had every line (not because the connection went). */
  get complete(): boolean {
    return this.completed;
  }

  start(): void {
    const resend = (this.options.resend ?? []).map((lines): Unacked => ({ lines, sends: [] }));
    for (const batch of resend) this.insert(batch);
    for (const batch of resend) if (!this.transmit(batch)) return;
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
    if (this.closed) return;
    const index = this.unacked.findIndex((batch) => batch.lines[batch.lines.length - 1]!.seq === cursor.seq);
    if (index < 0) return; // an answer to a batch sent twice, acknowledged already
    const [acked] = this.unacked.splice(index, 1);
    // Answers come in the order of the sends: each send before the one answered
    // here and still unanswered was refused. Sent twice, the batch's earliest
    // send counts as the answered one: that may miss a refusal (the timeout
    // finds it), never invent one.
    const answered = acked!.sends[0] ?? 0;
    const refused: Unacked[] = [];
    for (const batch of this.unacked) {
      batch.sends = batch.sends.filter((send) => send > answered);
      if (batch.sends.length === 0) refused.push(batch);
    }
    this.probing = false;
    this.resendDelayMs = this.options.ackTimeoutMs;
    this.options.clock.clearTimeout(this.resendTimer);
    this.resendTimer = undefined;
    if (refused.length > 0) this.log.debug("The control plane refused log batches; sending them again", { batches: refused.length });
    for (const batch of refused) if (!this.transmit(batch)) return;
    this.armResend();
    if (this.finishing && this.drained) {
      this.settleIfDone();
      return;
    }
    if (this.paused && this.sent.seq - this.ackedSeq <= this.options.maxInflightLines / 2) {
      this.paused = false;
      this.schedule(0);
    }
  }

  /** Stops polling; what was not sent is read again by the next shipper, what was not acknowledged is handed to it. */
  stop(): void {
    if (this.closed) return;
    this.closed = true;
    this.options.clock.clearTimeout(this.timer);
    this.options.clock.clearTimeout(this.resendTimer);
    void this.source?.close();
    this.options.onClose?.(this.unacked.map((batch) => batch.lines));
    this.resolveDone();
  }

  /** Sends a batch (again); false, and the shipper stops, when the connection is not ready. */
  private transmit(batch: Unacked, isNew = false): boolean {
    if (this.closed) return false;
    if (!this.options.send({ type: "logs", deploymentId: this.options.deploymentId, lines: batch.lines })) {
      this.log.debug("Not connected: log shipping stops until the next sync");
      this.stop();
      return false;
    }
    batch.sends.push(++this.sends);
    if (isNew) this.insert(batch);
    this.armResend();
    return true;
  }

  private insert(batch: Unacked): void {
    const first = batch.lines[0]!.seq;
    const at = this.unacked.findIndex((other) => other.lines[0]!.seq > first);
    if (at < 0) this.unacked.push(batch);
    else this.unacked.splice(at, 0, batch);
  }

  private armResend(): void {
    if (this.resendTimer !== undefined || this.unacked.length === 0 || this.closed) return;
    this.resendTimer = this.options.clock.setTimeout(() => {
      this.resendTimer = undefined;
      if (this.closed || this.unacked.length === 0) return;
      this.log.debug("Log batches unanswered; sending the oldest again", { batches: this.unacked.length, afterMs: this.resendDelayMs });
      this.probing = true;
      this.resendDelayMs = Math.min(MAX_RESEND_DELAY_MS, this.resendDelayMs * 2);
      this.transmit(this.unacked[0]!);
    }, this.resendDelayMs);
  }

  private settleIfDone(): void {
    if (this.unacked.length > 0) return;
    this.completed = true;
    this.stop();
  }

  private schedule(delayMs: number): void {
    this.options.clock.clearTimeout(this.timer);
    this.timer = this.options.clock.setTimeout(() => void this.poll(), delayMs);
  }

  private async poll(): Promise<void> {
    if (this.closed || this.polling) return;
    // The control plane answers nothing: new lines wait until it takes the old ones.
    if (this.probing) return this.schedule(this.options.idlePollMaxMs);
    this.polling = true;
    let lines: LogLine[];
    try {
      lines = await this.readNew();
    } catch (error) {
      if (error instanceof ContainerNotFoundError) return this.stop();
      this.log.warn("Cannot read a container's log; trying again", { error });
      lines = [];
    } finally {
      this.polling = false;
    }
    if (this.closed) return;
    if (lines.length > 0) this.ship(lines);
    if (this.closed || this.paused) return;
    if (lines.length === 0 && this.finishing) {
      this.drained = true;
      return this.settleIfDone();
    }
    if (lines.length > 0) this.idleDelayMs = this.options.pollMs;
    else this.idleDelayMs = Math.min(this.options.idlePollMaxMs, this.idleDelayMs * 2);
    // A full window means the container outpaces the polls: read again at once.
    this.schedule(lines.length >= this.options.batchLines ? 0 : lines.length > 0 ? this.options.pollMs : this.idleDelayMs);
  }

  private async readNew(): Promise<LogLine[]> {
    const { containerId, logPath, runtime } = this.options;
    this.source ??= await openLogSource({ containerId, logPath }, runtime, this.log);
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
      if (!this.transmit({ lines: batch, sends: [] }, true)) return;
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
      this.log.debug("Log shipping waits for the control plane to catch up", { unacked: this.sent.seq - this.ackedSeq });
      this.paused = true;
    }
  }
}

/** The message cut, on whole characters, to the wire's 64 Ki UTF-16 units and to what fits a frame, with its size as JSON. */
function fitMessage(text: string, maxBytes: number): { message: string; bytes: number } {
  let message = cutOnWholeCharacters(text, MAX_MESSAGE_CHARS);
  let bytes = Buffer.byteLength(JSON.stringify(message));
  while (bytes > maxBytes && message.length > 0) {
    message = cutOnWholeCharacters(message, Math.floor((message.length * maxBytes) / bytes) - 1);
    bytes = Buffer.byteLength(JSON.stringify(message));
  }
  return { message, bytes };
}
