import { describe, expect, it } from "vitest";
import { LogBuffer } from "../src/components/log-buffer";

const line = (seq: number, message = `line ${seq}`) => ({ seq, message, stream: "stdout" as const, timestamp: new Date(seq * 1000).toISOString() });

describe("the log view's buffer", () => {
  it("keeps each line once, by seq: a stream read again after a restart repeats none", () => {
    const b = new LogBuffer(100);
    for (let seq = 1; seq <= 5; seq++) b.push(line(seq));
    // Read again from a tail that overlaps what is held, then new lines.
    for (let seq = 3; seq <= 8; seq++) b.push(line(seq));
    expect(b.lines().map((l) => l.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(b.version).toBe(8);
  });

  it("holds the newest max lines at most, however many come", () => {
    const b = new LogBuffer(1_000);
    for (let seq = 1; seq <= 25_000; seq++) {
      b.push(line(seq));
      expect(b.length).toBeLessThanOrEqual(1_000);
    }
    const held = b.lines();
    expect(held).toHaveLength(1_000);
    expect(held[0]!.seq).toBe(24_001);
    expect(held.at(-1)!.seq).toBe(25_000);
    expect(b.version).toBe(25_000);
  });

  it("writes the lines as a text file, one a line", () => {
    const b = new LogBuffer();
    b.push(line(1, "hello"));
    b.push({ ...line(2, "oops"), stream: "stderr" });
    expect(b.toText()).toBe(`${line(1).timestamp} stdout hello\n${line(2).timestamp} stderr oops\n`);
  });
});
