// What the control plane stores of a node's log lines, bounded: an agent is
// anyone who enrolled a machine, and a node priced at 0 with a tenant holding 0
// credits once wrote 151 MB into the database in 3 s. Each line is cut to
// MAX_STORED_LINE_CHARS, its time is kept near when it arrived, each
// deployment keeps its 10,000 highest-numbered lines (log-ingest.ts), and each node's
// connection may store LOG_INGEST_BYTES_PER_S on average.

import type { NewLogLine } from "@cm/db";
import type { LogLineFrame } from "@cm/protocol";

/** Docker's json-file splits longer lines at 16 KiB; we keep as much of one. */
export const MAX_STORED_LINE_CHARS = 16 * 1024;
/** A line stamped further ahead of its arrival is stamped with its arrival. */
const MAX_AHEAD_MS = 5 * 60_000;
/** A line stamped further back than this is stamped with its arrival: no container ran that long ago. */
const MAX_BEHIND_MS = 400 * 24 * 3_600_000;
/** What a stored line costs beyond its text (the row, the index): so a flood of empty lines costs too. */
export const LINE_OVERHEAD_BYTES = 64;

/** Pure: the line as it is stored. */
export function storedLine(line: LogLineFrame, arrivedMs: number): NewLogLine {
  const message =
    line.message.length > MAX_STORED_LINE_CHARS
      ? `${line.message.slice(0, MAX_STORED_LINE_CHARS)} … [line cut: ${line.message.length} characters]`
      : line.message;
  const stampedMs = Date.parse(line.ts);
  const believable = !Number.isNaN(stampedMs) && stampedMs <= arrivedMs + MAX_AHEAD_MS && stampedMs >= arrivedMs - MAX_BEHIND_MS;
  return believable
    ? { seq: line.seq, ts: line.ts, tsMs: stampedMs, stream: line.stream, message }
    : { seq: line.seq, ts: new Date(arrivedMs).toISOString(), tsMs: arrivedMs, stream: line.stream, message };
}

/** What storing these lines costs against a node's budget. */
export function ingestCost(lines: readonly NewLogLine[]): number {
  let bytes = 0;
  for (const line of lines) bytes += Buffer.byteLength(line.message) + LINE_OVERHEAD_BYTES;
  return bytes;
}

/**
 * A token bucket: `ratePerS` on average, up to `burstS` seconds' worth at once.
 * take() answers whether `amount` fits now, and takes it if so.
 */
export class TokenBucket {
  private tokens: number;
  private atMs: number;

  constructor(
    private readonly ratePerS: number,
    private readonly burstS: number,
    nowMs: number,
  ) {
    this.tokens = ratePerS * burstS;
    this.atMs = nowMs;
  }

  take(amount: number, nowMs: number): boolean {
    const capacity = this.ratePerS * this.burstS;
    this.tokens = Math.min(capacity, this.tokens + ((nowMs - this.atMs) / 1000) * this.ratePerS);
    this.atMs = Math.max(this.atMs, nowMs);
    if (amount > this.tokens && this.tokens < capacity) return false;
    // A batch larger than the whole bucket still goes when the bucket is full, leaving it in debt.
    this.tokens -= amount;
    return true;
  }
}
