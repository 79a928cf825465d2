// JSON lines on stderr: the fault suite and log shippers read `msg`, `level` and the fields.
import { lazyChild } from "@cm/log";
import { describe, expect, it } from "vitest";
import { createLogger, type LogLevel } from "../../src/services/logger";

function capture(level: LogLevel = "debug") {
  const records: Record<string, unknown>[] = [];
  const log = createLogger(level, "control-plane", { write: (line: string) => void records.push(JSON.parse(line)) });
  return { records, log };
}

describe("control-plane logger", () => {
  it("writes level, time, name, msg and the fields as one JSON object per line", () => {
    const { records, log } = capture();
    log.info("control plane listening", { port: 8080 });
    expect(records).toEqual([
      {
        level: "info",
        time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        name: "control-plane",
        msg: "control plane listening",
        port: 8080,
      },
    ]);
  });

  it("honours the level, silent included", () => {
    const warn = capture("warn");
    warn.log.info("hidden");
    warn.log.warn("shown");
    expect(warn.records.map((r) => r.msg)).toEqual(["shown"]);
    const silent = capture("silent");
    silent.log.error("hidden");
    silent.log.child({ nodeId: "node_1" }).error("hidden");
    expect(silent.records).toEqual([]);
  });

  it("puts a child's fields (a request, node or deployment id) on every line it writes", () => {
    const { records, log } = capture();
    const node = log.child({ nodeId: "node_1" });
    node.info("agent connected", { protocolVersion: 1 });
    node.child({ requestId: "req_1" }).warn("nested");
    log.info("parent untouched");
    expect(records).toMatchObject([
      { msg: "agent connected", nodeId: "node_1", protocolVersion: 1 },
      { msg: "nested", nodeId: "node_1", requestId: "req_1" },
      { msg: "parent untouched" },
    ]);
    expect(records[2]).not.toHaveProperty("nodeId");
  });

  it("makes a request's child logger only when it first logs, with the request's fields", () => {
    const { records, log } = capture();
    let made = 0;
    const parent = { ...log, child: (fields: Record<string, unknown>) => (made++, log.child(fields)) };
    const request = lazyChild(parent, { requestId: "req_1" });
    expect(made).toBe(0);
    request.warn("slow", { ms: 12 });
    request.child({ nodeId: "node_1" }).info("nested");
    expect(made).toBe(1);
    expect(records).toMatchObject([
      { msg: "slow", requestId: "req_1", ms: 12 },
      { msg: "nested", requestId: "req_1", nodeId: "node_1" },
    ]);
  });

  it("writes an Error under err with its stack, and one under another key as its message", () => {
    const { records, log } = capture();
    log.error("agent: frame failed", { err: new RangeError("boom"), other: new Error("just the message") });
    expect(records[0]).toMatchObject({
      err: { type: "RangeError", message: "boom", stack: expect.stringMatching(/^RangeError: boom\n\s+at /) },
      other: "just the message",
    });
  });
});
