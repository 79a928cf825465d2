// One LogShipper per deployment whose container's log is being shipped. All of
// them stop when the connection drops; the next sync restarts them from the
// control plane's acknowledged cursors, so nothing is lost and nothing is sent twice.
// The control plane's cursor is its newest stored line, so it may lie past a batch
// it refused: batches never acknowledged are kept here and sent first by the
// deployment's next shipper.
import type { LogCursor, LogLineFrame } from "@cm/protocol";
import type { Clock, TimerHandle } from "../clock";
import type { Timing } from "../config";
import type { Logger } from "../logger";
import type { LogClient } from "../runtime/container-runtime";
import { LogShipper } from "./log-shipper";

export interface LogShippingOptions {
  runtime: LogClient;
  send(frame: { type: "logs"; deploymentId: string; lines: LogLineFrame[] }): boolean;
  clock: Clock;
  logger: Logger;
  timing: Pick<Timing, "logPollMs" | "logIdlePollMaxMs" | "logBatchLines" | "logMaxInflightLines" | "logAckTimeoutMs">;
  /** the largest frame the control plane reads, once its welcome said so */
  maxFrameBytes?: () => number | undefined;
}

/**
 * How finish() ended: every line acknowledged; the control plane did not take
 * them in time; or shipping stopped first (the connection dropped, the
 * container went), so the next sync ships the rest.
 */
export type FinishOutcome = "complete" | "timeout" | "stopped";

export class LogShipping {
  private readonly shippers = new Map<string, LogShipper>();
  /** the highest seq this process numbered per deployment, and for which container */
  private readonly numbered = new Map<string, { containerId: string; seq: number }>();
  /** batches a stopped shipper sent and never saw acknowledged, per deployment */
  private readonly unacked = new Map<string, LogLineFrame[][]>();

  constructor(private readonly options: LogShippingOptions) {}

  /**
   * Starts shipping the container's log after `cursor`, unless it is shipped
   * already. `ended`: the container does not run; ship what is there and finish.
   */
  ensure(deploymentId: string, container: { id: string; logPath: string | null }, cursor: LogCursor, ended = false): void {
    const containerId = container.id;
    const existing = this.shippers.get(deploymentId);
    if (existing && existing.containerId === containerId && !existing.finished) return;
    existing?.stop();
    const start = this.resumeCursor(deploymentId, containerId, cursor, existing);
    // Lines after the start are read again from the log; those before it only live here.
    const resend = (this.unacked.get(deploymentId) ?? []).map((batch) => batch.filter((line) => line.seq <= start.seq)).filter((batch) => batch.length > 0);
    this.unacked.delete(deploymentId);
    const shipper: LogShipper = new LogShipper({
      deploymentId,
      containerId,
      logPath: container.logPath,
      cursor: start,
      resend,
      onClose: (unacked) => {
        const current = this.shippers.get(deploymentId);
        if (current && current !== shipper) return;
        if (unacked.length > 0) this.unacked.set(deploymentId, unacked);
        else this.unacked.delete(deploymentId);
      },
      runtime: this.options.runtime,
      send: (frame) => {
        const sent = this.options.send(frame);
        const last = frame.lines[frame.lines.length - 1];
        // A batch sent again is older than what was numbered since: keep the highest.
        const highest = Math.max(last?.seq ?? 0, this.numbered.get(deploymentId)?.seq ?? 0);
        if (sent && last) this.numbered.set(deploymentId, { containerId, seq: highest });
        return sent;
      },
      clock: this.options.clock,
      logger: this.options.logger,
      batchLines: this.options.timing.logBatchLines,
      maxInflightLines: this.options.timing.logMaxInflightLines,
      pollMs: this.options.timing.logPollMs,
      idlePollMaxMs: this.options.timing.logIdlePollMaxMs,
      ackTimeoutMs: this.options.timing.logAckTimeoutMs,
      ...(this.options.maxFrameBytes ? { maxFrameBytes: this.options.maxFrameBytes } : {}),
    });
    this.shippers.set(deploymentId, shipper);
    shipper.start();
    if (ended) shipper.finish();
  }

  onAck(deploymentId: string, cursor: LogCursor): void {
    this.shippers.get(deploymentId)?.onAck(cursor);
  }

  /** The container has ended: waits (at most timeoutMs) until its log was sent to the end. */
  async finish(deploymentId: string, timeoutMs: number): Promise<FinishOutcome> {
    const shipper = this.shippers.get(deploymentId);
    if (!shipper) return "complete";
    shipper.finish();
    let timer: TimerHandle | undefined;
    const timedOut = await Promise.race([
      shipper.done.then(() => false),
      new Promise<boolean>((resolve) => (timer = this.options.clock.setTimeout(() => resolve(true), timeoutMs))),
    ]);
    this.options.clock.clearTimeout(timer);
    if (shipper.complete) return "complete";
    return timedOut ? "timeout" : "stopped";
  }

  /** The deployment is gone: its unacknowledged lines go with it. */
  stop(deploymentId: string): void {
    this.shippers.get(deploymentId)?.stop();
    this.shippers.delete(deploymentId);
    this.unacked.delete(deploymentId);
  }

  stopAll(): void {
    for (const shipper of this.shippers.values()) shipper.stop();
    this.shippers.clear();
  }

  private resumeCursor(deploymentId: string, containerId: string, cursor: LogCursor, previous: LogShipper | undefined): LogCursor {
    // Same container on the same connection: the control plane's cursor may lag
    // what is in flight; carry on after what was sent instead of sending it twice.
    if (previous && previous.containerId === containerId && previous.lastSent.seq > cursor.seq) return previous.lastSent;
    // A new run's container: the cursor may predate the old run's last lines, so
    // never reuse a seq this process already gave out.
    const numbered = this.numbered.get(deploymentId);
    if (numbered && numbered.containerId !== containerId && numbered.seq > cursor.seq) return { seq: numbered.seq, dockerTs: cursor.dockerTs };
    return cursor;
  }
}
