// LogShipper against an in-memory log with Docker's read semantics (tail, since),
// read through the Docker API source.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LogLineFrame } from "@cm/protocol";
import { afterEach, describe, expect, it } from "vitest";
import { systemClock } from "../../src/clock";
import { silentLogger } from "../../src/logger";
import type { LogShipperOptions } from "../../src/logs/log-shipper";
import { LogShipper } from "../../src/logs/log-shipper";
import type { LogClient } from "../../src/runtime/container-runtime";
import type { LogLine, LogOptions } from "../../src/runtime/types";

class MemoryLog implements LogClient {
  readonly lines: LogLine[] = [];
  reads: LogOptions[] = [];
  private ns = 0n;

  append(count: number, stream: LogLine["stream"] = "stdout", text?: string): void {
    for (let i = 0; i < count; i++) {
      this.ns += 1_000n; // a line every microsecond
      const seconds = Number(this.ns / 1_000_000_000n);
      const fraction = String(this.ns % 1_000_000_000n).padStart(9, "0");
      const dockerTimestamp = `${new Date(Date.UTC(2026, 0, 1) + seconds * 1000).toISOString().slice(0, 19)}.${fraction}Z`;
      this.lines.push({ timestamp: `${dockerTimestamp.slice(0, 23)}Z`, dockerTimestamp, stream, message: text ?? `line ${this.lines.length + 1}` });
    }
  }

  async logs(_id: string, options: LogOptions, onLine: (line: LogLine) => void) {
    this.reads.push(options);
    let lines = this.lines;
    if (options.since) lines = lines.filter((line) => new Date(line.timestamp) >= options.since!);
    if (options.tail !== undefined) lines = lines.slice(-options.tail);
    for (const line of lines) onLine(line);
    return { stop: () => {}, done: Promise.resolve() };
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
let shipper: LogShipper | undefined;
afterEach(() => shipper?.stop());

function ship(log: MemoryLog, overrides: Partial<LogShipperOptions> = {}) {
  const frames: LogLineFrame[][] = [];
  shipper = new LogShipper({
    deploymentId: "dep",
    containerId: "c",
    logPath: null, // through the API source; json-file-source.test.ts covers the other
    cursor: { seq: 0, dockerTs: null },
    runtime: log,
    send: (frame) => (frames.push(frame.lines), true),
    clock: systemClock,
    logger: silentLogger,
    batchLines: 100,
    maxInflightLines: 10_000,
    pollMs: 5,
    idlePollMaxMs: 20,
    ackTimeoutMs: 60_000, // log-resend.test.ts covers batches sent again
    ...overrides,
  });
  shipper.start();
  return { frames, lines: () => frames.flat(), shipper };
}

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await sleep(10);
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

describe("LogShipper", () => {
  it("ships every line once, numbered from the cursor, in frames of at most batchLines", async () => {
    const log = new MemoryLog();
    log.append(250);
    const { frames, lines } = ship(log, { cursor: { seq: 41, dockerTs: null } });
    await until(() => lines().length === 250, "250 lines");
    log.append(30, "stderr");
    await until(() => lines().length === 280, "280 lines");
    await sleep(50);
    expect(lines().map((l) => l.seq)).toEqual(Array.from({ length: 280 }, (_, i) => 42 + i));
    expect(lines().map((l) => l.message)).toEqual(log.lines.map((l) => l.message));
    expect(lines()[279]).toMatchObject({ stream: "stderr", ts: log.lines[279]!.dockerTimestamp });
    expect(Math.max(...frames.map((f) => f.length))).toBe(100);
    expect(log.reads[0]).toEqual({ follow: false }); // no cursor: the whole log once
    expect(log.reads.slice(1).every((read) => read.tail !== undefined && read.since === undefined)).toBe(true);
  });

  it("resumes right after the cursor line", async () => {
    const log = new MemoryLog();
    log.append(1000);
    const cursorLine = log.lines[899]!;
    const { lines } = ship(log, { cursor: { seq: 900, dockerTs: cursorLine.dockerTimestamp } });
    await until(() => lines().length === 100, "100 lines");
    await sleep(30);
    expect(lines()[0]).toMatchObject({ seq: 901, message: "line 901" });
    expect(lines()).toHaveLength(100);
  });

  it("widens its window when the cursor lies far back", async () => {
    const log = new MemoryLog();
    log.append(50_000);
    const { lines } = ship(log, { cursor: { seq: 10, dockerTs: log.lines[9]!.dockerTimestamp }, batchLines: 1000, maxInflightLines: 100_000 });
    await until(() => lines().length === 49_990, "the rest of the log");
    expect(lines()[0]).toMatchObject({ seq: 11, message: "line 11" });
    expect(log.reads.filter((read) => read.tail !== undefined).length).toBeLessThanOrEqual(3);
  });

  it("waits for acknowledgements when too much is in flight", async () => {
    const log = new MemoryLog();
    log.append(500);
    const { lines, shipper } = ship(log, { maxInflightLines: 200 });
    await until(() => lines().length >= 200, "the first 200 lines");
    await sleep(50);
    expect(lines()).toHaveLength(200);
    shipper.onAck({ seq: 50, dockerTs: null });
    await sleep(50);
    expect(lines()).toHaveLength(200); // 150 still in flight: more than half the limit
    // The control plane acknowledges each frame by its last line.
    shipper.onAck({ seq: 100, dockerTs: null });
    shipper.onAck({ seq: 200, dockerTs: null });
    await until(() => lines().length === 400, "200 more");
  });

  it("stops when the connection is gone", async () => {
    const log = new MemoryLog();
    log.append(10);
    let sends = 0;
    const { shipper } = ship(log, { send: () => (sends++, false) });
    await shipper.done;
    expect(sends).toBe(1);
    expect(shipper.finished).toBe(true);
  });

  it("on finish ships what is left and settles", async () => {
    const log = new MemoryLog();
    log.append(5);
    const frames: LogLineFrame[][] = [];
    // It settles once the control plane has acknowledged the last line.
    const ackLater = (lines: LogLineFrame[]) => setTimeout(() => shipper?.onAck({ seq: lines.at(-1)!.seq, dockerTs: null }), 5);
    const { shipper: finishing } = ship(log, { idlePollMaxMs: 10_000, send: (frame) => (frames.push(frame.lines), ackLater(frame.lines), true) });
    await until(() => frames.flat().length === 5, "5 lines");
    log.append(3);
    finishing.finish();
    await finishing.done;
    expect(frames.flat().map((l) => l.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it("keeps frames within the control plane's maxFrameBytes, cutting a line that alone is too big", async () => {
    const log = new MemoryLog();
    log.append(40, "stdout", "é".repeat(1000));
    log.append(1, "stdout", "x".repeat(20_000));
    const sizes: number[] = [];
    const { lines } = ship(log, {
      maxFrameBytes: () => 8192,
      send: (frame) => (sizes.push(Buffer.byteLength(JSON.stringify(frame))), frames.push(frame.lines), true),
    });
    const frames: LogLineFrame[][] = [];
    await until(() => frames.flat().length === 41, "41 lines");
    expect(lines()).toEqual([]); // sent through the custom send above
    expect(Math.max(...sizes)).toBeLessThanOrEqual(8192);
    expect(frames.flat()[40]!.message.length).toBeGreaterThan(5000);
    expect(frames.flat()[40]!.message.length).toBeLessThan(8192);
    expect(frames.flat().map((l) => l.seq)).toEqual(Array.from({ length: 41 }, (_, i) => i + 1));
  });

  it("reads the json-file when it has one, and loses nothing while it waits for acknowledgements", async () => {
    const dir = mkdtempSync(join(tmpdir(), "cm-shipper-"));
    const path = join(dir, "c-json.log");
    let text = "";
    for (let i = 1; i <= 1000; i++)
      text += `${JSON.stringify({ log: `line ${i}\n`, stream: "stdout", time: `2026-01-01T00:00:00.${String(i).padStart(9, "0")}Z` })}\n`;
    writeFileSync(path, text);
    try {
      const { lines, frames, shipper } = ship(new MemoryLog(), { logPath: path, maxInflightLines: 300 });
      await until(() => lines().length === 300, "300 lines");
      expect(shipper.sourceKind).toBe("json-file");
      for (let acked = 0; lines().length < 1000; ) {
        const sent = lines().length;
        for (; acked < frames.length; acked++) shipper.onAck({ seq: frames[acked]!.at(-1)!.seq, dockerTs: null });
        await until(() => lines().length > sent, "more lines");
      }
      expect(lines().map((l) => l.message)).toEqual(Array.from({ length: 1000 }, (_, i) => `line ${i + 1}`));
      expect(lines().map((l) => l.seq)).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
