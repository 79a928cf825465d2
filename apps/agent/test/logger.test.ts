// The journal line the operator reads (apps/agent/README.md): `<ISO time> LEVEL message {context}`.
import { describe, expect, it } from "vitest";
import type { LogLevel } from "../src/config";
import { createLogger } from "../src/logger";

const at = new Date("2026-11-25T03:00:00.000Z");

function capture(level: LogLevel = "debug") {
  const lines: string[] = [];
  return { lines, logger: createLogger({ level, write: (line) => lines.push(line), now: () => at }) };
}

describe("agent logger", () => {
  it("writes one line per event: time, padded level, message, then the context as compact JSON", () => {
    const { lines, logger } = capture();
    logger.info("Adopted existing containers", { nodeId: "node_1", total: 2 });
    logger.debug("No context");
    logger.warn("Empty context", {});
    expect(lines).toEqual([
      '2026-11-25T03:00:00.000Z INFO  Adopted existing containers {"nodeId":"node_1","total":2}',
      "2026-11-25T03:00:00.000Z DEBUG No context",
      "2026-11-25T03:00:00.000Z WARN  Empty context",
    ]);
  });

  it("honours the level, silent included", () => {
    const info = capture("info");
    info.logger.debug("hidden");
    info.logger.error("shown");
    expect(info.lines).toEqual(["2026-11-25T03:00:00.000Z ERROR shown"]);
    const silent = capture("silent");
    silent.logger.error("hidden");
    silent.logger.child({ deploymentId: "dep_1" }).error("hidden");
    expect(silent.lines).toEqual([]);
  });

  it("puts a child's context on each of its lines, before the call's own", () => {
    const { lines, logger } = capture();
    const dep = logger.child({ deploymentId: "dep_1" });
    dep.warn("Cannot read a container's log; trying again", { attempt: 2 });
    dep.child({ containerId: "c1" }).info("Started");
    logger.info("Parent untouched");
    expect(lines).toEqual([
      `2026-11-25T03:00:00.000Z WARN  Cannot read a container's log; trying again {"deploymentId":"dep_1","attempt":2}`,
      '2026-11-25T03:00:00.000Z INFO  Started {"deploymentId":"dep_1","containerId":"c1"}',
      "2026-11-25T03:00:00.000Z INFO  Parent untouched",
    ]);
  });

  it("writes an Error under err with its stack, and one under any other key as its message, on one line", () => {
    const { lines, logger } = capture();
    logger.error("Stopping the agent failed", { err: new TypeError("boom") });
    logger.warn("Cannot write the agent's status file", { error: new Error("EACCES: permission denied") });
    expect(lines).toHaveLength(2);
    expect(lines[0]).not.toContain("\n");
    const err = JSON.parse(lines[0]!.slice(lines[0]!.indexOf("{"))).err;
    expect(err).toMatchObject({ type: "TypeError", message: "boom" });
    expect(err.stack).toMatch(/^TypeError: boom\n\s+at /);
    expect(lines[1]).toBe(`2026-11-25T03:00:00.000Z WARN  Cannot write the agent's status file {"error":"EACCES: permission denied"}`);
  });
});
