import { describe, expect, it } from "vitest";
import { dockerTsToNs, resumeSince } from "../../src/logs/docker-ts";
import { linesAfterNs, newLinesAfter } from "../../src/logs/log-window";
import type { LogLine } from "../../src/runtime/types";

const line = (dockerTimestamp: string, message: string, stream: LogLine["stream"] = "stdout"): LogLine => ({
  timestamp: `${dockerTimestamp.slice(0, 23)}Z`,
  dockerTimestamp,
  stream,
  message,
});

describe("docker timestamps", () => {
  it("compares at nanosecond precision whatever the trimming", () => {
    expect(dockerTsToNs("2026-01-01T00:00:00.000000001Z")! - dockerTsToNs("2026-01-01T00:00:00Z")!).toBe(1n);
    expect(dockerTsToNs("2026-01-01T00:00:00.1Z")).toBe(dockerTsToNs("2026-01-01T00:00:00.100000000Z"));
    expect(dockerTsToNs("2026-01-01T02:00:00.5+02:00")).toBe(dockerTsToNs("2026-01-01T00:00:00.5Z"));
    expect(dockerTsToNs("yesterday")).toBeUndefined();
  });

  it("resumes from the whole second", () => {
    expect(resumeSince("2026-01-01T00:00:07.999999999Z")?.toISOString()).toBe("2026-01-01T00:00:07.000Z");
    expect(resumeSince(null)).toBeUndefined();
  });
});

describe("newLinesAfter", () => {
  const window = [
    line("2026-01-01T00:00:01.000000001Z", "a"),
    line("2026-01-01T00:00:01.000000005Z", "b"),
    // stderr stamped a moment earlier but written later: found by position, not lost
    line("2026-01-01T00:00:01.000000004Z", "c", "stderr"),
    line("2026-01-01T00:00:01.000000009Z", "d"),
  ];

  it("returns what follows the cursor line in the window", () => {
    expect(newLinesAfter(window, 10, "2026-01-01T00:00:01.000000005Z")).toEqual({ kind: "new", lines: window.slice(2) });
    expect(newLinesAfter(window, 10, "2026-01-01T00:00:01.000000009Z")).toEqual({ kind: "new", lines: [] });
  });

  it("asks for a wider window when every line is newer than the cursor", () => {
    const result = newLinesAfter(window, 4, "2026-01-01T00:00:00.999999999Z");
    expect(result.kind).toBe("widen");
    // four lines in 8 ns and the cursor 2 ns before them: about one more line
    expect(result.kind === "widen" && result.estimatedLines).toBeGreaterThanOrEqual(5);
  });

  it("takes the whole log when it is shorter than asked for and the cursor is gone (a new container)", () => {
    expect(newLinesAfter(window, 10, "2025-12-31T23:59:00Z")).toEqual({ kind: "new", lines: window });
  });

  it("falls back to timestamps when the cursor lies inside the window but is not there", () => {
    expect(newLinesAfter(window, 4, "2026-01-01T00:00:01.000000006Z")).toEqual({ kind: "new", lines: [window[3]] });
  });

  it("drops lines it cannot place", () => {
    expect(linesAfterNs([line("garbage", "x"), ...window], dockerTsToNs("2026-01-01T00:00:01.000000004Z"))).toEqual([window[1], window[3]]);
  });
});
