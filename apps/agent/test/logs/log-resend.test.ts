// Log batches the control plane refuses ("send it again later", during a
// database outage) are sent again, in order, and a later batch's ack never
// moves the shipper past them. The control plane here behaves as the real one:
// it answers every logs frame in arrival order, either with a logs_ack for that
// frame's last line or with an error frame, and stores lines by seq.

import type { LogCursor, LogLineFrame } from "@cm/protocol";
import { afterEach, describe, expect, it } from "vitest";
import { systemClock } from "../../src/clock";
import { silentLogger } from "../../src/logger";
import { LogShipping } from "../../src/logs/log-shipping";
import type { LogClient } from "../../src/runtime/container-runtime";
import type { LogLine, LogOptions } from "../../src/runtime/types";

class MemoryLog implements LogClient {
  readonly lines: LogLine[] = [];
  private ns = 0n;

  append(count: number): void {
    for (let i = 0; i < count; i++) {
      this.ns += 1_000n;
      const fraction = String(this.ns % 1_000_000_000n).padStart(9, "0");
      const dockerTimestamp = `2026-01-01T00:00:0${Number(this.ns / 1_000_000_000n)}.${fraction}Z`;
      this.lines.push({ timestamp: `${dockerTimestamp.slice(0, 23)}Z`, dockerTimestamp, stream: "stdout", message: `line ${this.lines.length + 1}` });
    }
  }

  async logs(_id: string, options: LogOptions, onLine: (line: LogLine) => void) {
    let lines = this.lines;
    if (options.tail !== undefined) lines = lines.slice(-options.tail);
    for (const line of lines) onLine(line);
    return { stop: () => {}, done: Promise.resolve() };
  }
}

/** Answers each frame in order, a little later, as the real control plane's serial frame queue does. */
class OrderedControlPlane {
  readonly stored = new Map<number, LogLineFrame>();
  frames = 0;
  refusals = 0;
  connected = true;
  /** how long each frame takes, one after another */
  delayMs = 2;
  /** true: the frame is answered with "send it again later" */
  refuse: (frameNumber: number, lines: LogLineFrame[]) => boolean = () => false;
  private queue: Promise<void> = Promise.resolve();
  onAck: (deploymentId: string, cursor: LogCursor) => void = () => {};

  send = (frame: { type: "logs"; deploymentId: string; lines: LogLineFrame[] }): boolean => {
    if (!this.connected) return false;
    const number = ++this.frames;
    this.queue = this.queue.then(async () => {
      await new Promise((resolve) => setTimeout(resolve, this.delayMs));
      if (!this.connected) return;
      if (this.refuse(number, frame.lines)) {
        this.refusals += 1;
        return; // the real one sends an error frame, which names no deployment
      }
      for (const line of frame.lines) this.stored.set(line.seq, line);
      const last = frame.lines.at(-1)!;
      this.onAck(frame.deploymentId, { seq: last.seq, dockerTs: last.ts });
    });
    return true;
  };

  /** Where the real control plane resumes a deployment: its newest stored line. */
  cursor(): LogCursor {
    const seq = Math.max(0, ...this.stored.keys());
    return { seq, dockerTs: this.stored.get(seq)?.ts ?? null };
  }

  missing(upTo: number): number[] {
    return Array.from({ length: upTo }, (_, i) => i + 1).filter((seq) => !this.stored.has(seq));
  }
}

let shipping: LogShipping | undefined;
afterEach(() => shipping?.stopAll());

function shippingTo(cp: OrderedControlPlane, log: MemoryLog): LogShipping {
  shipping = new LogShipping({
    runtime: log,
    send: cp.send,
    clock: systemClock,
    logger: silentLogger,
    timing: { logPollMs: 5, logIdlePollMaxMs: 20, logBatchLines: 10, logMaxInflightLines: 10_000, logAckTimeoutMs: 100 },
  });
  cp.onAck = (deploymentId, cursor) => shipping!.onAck(deploymentId, cursor);
  return shipping;
}

async function until(check: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const container = { id: "c", logPath: null };

describe("refused log batches", () => {
  it("are sent again when a later batch's ack shows they were refused", async () => {
    const log = new MemoryLog();
    log.append(100);
    const cp = new OrderedControlPlane();
    cp.refuse = (n) => n === 2 || n === 3;
    shippingTo(cp, log).ensure("dep", container, { seq: 0, dockerTs: null });
    await until(() => cp.stored.size === 100, "100 lines stored", 3_000).catch(() => {});
    expect(cp.refusals).toBe(2);
    expect(cp.missing(100)).toEqual([]);
  });

  it("are sent again after an outage that refused every batch, oldest first", async () => {
    const log = new MemoryLog();
    log.append(50);
    const cp = new OrderedControlPlane();
    let outage = true;
    cp.refuse = () => outage;
    const sentSeqs: number[] = [];
    const send = cp.send;
    cp.send = (frame) => (sentSeqs.push(frame.lines[0]!.seq), send(frame));
    shippingTo(cp, log).ensure("dep", container, { seq: 0, dockerTs: null });
    await until(() => cp.refusals >= 5, "refusals");
    const beforeRecovery = sentSeqs.length;
    outage = false;
    await until(() => cp.stored.size === 50, "50 lines stored", 3_000).catch(() => {});
    expect(cp.missing(50)).toEqual([]);
    const resent = sentSeqs.slice(beforeRecovery);
    expect(resent.slice(0, 5)).toEqual([1, 11, 21, 31, 41]);
  });

  it("survive a reconnect: the next connection sends them though its cursor lies past them", async () => {
    const log = new MemoryLog();
    log.append(40);
    const cp = new OrderedControlPlane();
    cp.refuse = (_n, lines) => lines[0]!.seq === 1;
    const logs = shippingTo(cp, log);
    logs.ensure("dep", container, { seq: 0, dockerTs: null });
    await until(() => cp.stored.size === 30 && cp.refusals >= 2, "the batches after the refused one, and a refused resend");
    // The connection drops before the refused batch is taken.
    cp.connected = false;
    logs.stopAll();
    expect(cp.missing(40)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    cp.connected = true;
    cp.refuse = () => false;
    logs.ensure("dep", container, cp.cursor()); // the sync's cursor: the newest stored line
    await until(() => cp.missing(40).length === 0, "the gap filled", 3_000).catch(() => {});
    expect(cp.missing(40)).toEqual([]);
  });

  it("sent again never make a new run reuse line numbers already given out", async () => {
    const log = new MemoryLog();
    log.append(40);
    const cp = new OrderedControlPlane();
    const firstSends = new Map<number, number>();
    cp.refuse = (_n, lines) => (firstSends.set(lines[0]!.seq, (firstSends.get(lines[0]!.seq) ?? 0) + 1), lines[0]!.seq === 1 && firstSends.get(1) === 1);
    const sent: number[] = [];
    const send = cp.send;
    cp.send = (frame) => (sent.push(...frame.lines.map((line) => line.seq)), send(frame));
    const logs = shippingTo(cp, log);
    logs.ensure("dep", container, { seq: 0, dockerTs: null });
    await until(() => cp.stored.size === 40, "the first run's 40 lines");
    // The next run's command carries a cursor read before the first run's last lines were stored.
    const nextRun = new MemoryLog();
    nextRun.append(5);
    sent.length = 0;
    (logs as unknown as { options: { runtime: MemoryLog } }).options.runtime = nextRun;
    logs.ensure("dep", { id: "c2", logPath: null }, { seq: 5, dockerTs: null });
    await until(() => sent.length === 5, "the next run's 5 lines");
    expect(sent).toEqual([41, 42, 43, 44, 45]);
  });

  it("are told from slow answers: a control plane that is only slow gets one batch probed per ack timeout, never everything again", async () => {
    const log = new MemoryLog();
    log.append(50);
    const cp = new OrderedControlPlane();
    cp.delayMs = 150; // each frame answered 150 ms after the one before, against an ack timeout of 100 ms
    const sends = new Map<number, number>();
    const send = cp.send;
    cp.send = (frame) => (sends.set(frame.lines[0]!.seq, (sends.get(frame.lines[0]!.seq) ?? 0) + 1), send(frame));
    shippingTo(cp, log).ensure("dep", container, { seq: 0, dockerTs: null });
    await until(() => cp.stored.size === 50, "50 lines stored");
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // the probes' own answers
    expect(cp.missing(50)).toEqual([]);
    // Resending every unanswered batch at each timeout sent the later ones 3-5 times.
    expect(Math.max(...sends.values())).toBeLessThanOrEqual(2);
  });

  it("hold back finish() until the control plane has stored the last line", async () => {
    const log = new MemoryLog();
    log.append(30);
    const cp = new OrderedControlPlane();
    cp.refuse = (n) => n <= 3;
    const logs = shippingTo(cp, log);
    logs.ensure("dep", container, { seq: 0, dockerTs: null }, true);
    await logs.finish("dep", 3_000);
    expect(cp.missing(30)).toEqual([]);
  });
});
