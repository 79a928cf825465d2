import { describe, expect, it } from "vitest";
import { ingestCost, MAX_STORED_LINE_CHARS, storedLine, TokenBucket } from "../../src/agents/log-limits";

const now = Date.UTC(2026, 10, 1, 12, 0, 0);
const line = (message: string, ts = new Date(now - 1000).toISOString()) => ({ seq: 7, ts, stream: "stdout" as const, message });

describe("storedLine", () => {
  it("keeps a line and its time as sent when both are believable", () => {
    expect(storedLine(line("hello", "2026-11-01T11:59:59.123456789Z"), now)).toEqual({
      seq: 7,
      ts: "2026-11-01T11:59:59.123456789Z",
      tsMs: Date.parse("2026-11-01T11:59:59.123Z"),
      stream: "stdout",
      message: "hello",
    });
  });

  it("cuts a line past 16 KiB, saying so at the cut", () => {
    const stored = storedLine(line("x".repeat(100_000)), now);
    expect(stored.message).toBe(`${"x".repeat(MAX_STORED_LINE_CHARS)} … [line cut: 100000 characters]`);
    expect(storedLine(line("y".repeat(MAX_STORED_LINE_CHARS)), now).message).toHaveLength(MAX_STORED_LINE_CHARS);
  });

  it("stamps with its arrival a line from another century, from the future, or with no readable time", () => {
    for (const ts of ["1900-01-01T00:00:00Z", "2999-01-01T00:00:00.000000001Z", "not a time", new Date(now + 10 * 60_000).toISOString()]) {
      expect(storedLine(line("odd", ts), now)).toMatchObject({ ts: new Date(now).toISOString(), tsMs: now });
    }
    // A few minutes ahead (a clock a little off) or months back (an agent away) are kept.
    const ahead = new Date(now + 60_000).toISOString();
    expect(storedLine(line("a", ahead), now).ts).toBe(ahead);
    const monthsBack = new Date(now - 90 * 24 * 3_600_000).toISOString();
    expect(storedLine(line("b", monthsBack), now).ts).toBe(monthsBack);
  });

  it("charges every line its text and an overhead, so empty lines cost too", () => {
    expect(ingestCost([storedLine(line(""), now), storedLine(line("abcd"), now)])).toBe(64 + 68);
  });
});

describe("TokenBucket", () => {
  it("lets a burst through, then the rate, and refills with time", () => {
    const bucket = new TokenBucket(1000, 2, 0); // 1,000 a second, 2,000 at once
    expect(bucket.take(1500, 0)).toBe(true);
    expect(bucket.take(600, 0)).toBe(false);
    expect(bucket.take(500, 0)).toBe(true);
    expect(bucket.take(1, 0)).toBe(false);
    expect(bucket.take(500, 500)).toBe(true);
    expect(bucket.take(2000, 10_000)).toBe(true); // never more than the burst stored up
    expect(bucket.take(1, 10_000)).toBe(false);
  });

  it("lets one batch larger than the whole bucket through only when the bucket is full, then owes it", () => {
    const bucket = new TokenBucket(1000, 1, 0);
    expect(bucket.take(5000, 0)).toBe(true);
    expect(bucket.take(1, 3000)).toBe(false);
    expect(bucket.take(1, 5000)).toBe(true);
  });
});
