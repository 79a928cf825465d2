// The line loop-watch.ts writes when a test holds its worker's event loop: what
// a reader of a failed CI log needs to find the test.
import { describe, expect, it } from "vitest";
import { blockLine } from "../src/loop-watch";

describe("loop-watch's line", () => {
  it("names the file, the seconds, and the test the block was in", () => {
    const inTest = { running: "agent > restarts" };
    expect(blockLine({ file: "apps/agent/test/a.test.ts", blockedMs: 63_240, cpuMs: 120, before: inTest, after: inTest })).toBe(
      `[loop-watch] apps/agent/test/a.test.ts: the worker's event loop was blocked 63.2 s (0.1 s of it on its CPU) in test "agent > restarts"; at 60 s vitest fails the run with "Timeout calling onTaskUpdate"\n`,
    );
  });

  it("says where a block that spans more than one place began and ended", () => {
    const line = blockLine({ file: "f.test.ts", blockedMs: 12_000, cpuMs: 0, before: {}, after: { last: "a" } });
    expect(line).toContain('from before its first test (imports, collection or beforeAll) to after test "a"');
  });
});
