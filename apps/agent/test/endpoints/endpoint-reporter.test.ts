import { describe, expect, it } from "vitest";
import type { Clock, TimerHandle } from "../../src/clock";
import { EndpointReporter, type PortReadiness } from "../../src/endpoints/endpoint-reporter";
import { silentLogger } from "../../src/logger";

/** A clock whose timers run only when the test says, so each probe's next delay can be read. */
function manualClock() {
  const timers: Array<{ callback: () => void; delayMs: number; cleared: boolean }> = [];
  const clock: Clock = {
    now: () => 0,
    setTimeout: (callback, delayMs) => {
      const t = { callback, delayMs, cleared: false };
      timers.push(t);
      return t as unknown as TimerHandle;
    },
    clearTimeout: (handle) => {
      if (handle) (handle as unknown as { cleared: boolean }).cleared = true;
    },
  };
  const pending = () => timers.filter((t) => !t.cleared);
  return {
    clock,
    /** the delay of the one timer that is set */
    next: () => pending().at(-1)!.delayMs,
    /** runs the set timer, then lets the probe's promise settle */
    async fire() {
      const t = pending().at(-1)!;
      t.cleared = true;
      t.callback();
      await new Promise((r) => setTimeout(r, 0));
    },
  };
}

function setup(answers: Array<PortReadiness[] | undefined | Error>) {
  const c = manualClock();
  const sent: unknown[] = [];
  const reporter = new EndpointReporter({
    probe: async () => {
      const a = answers.shift();
      if (a instanceof Error) throw a;
      return a;
    },
    running: () => ["dep_1"],
    send: (frame) => (sent.push(frame), true),
    clock: c.clock,
    logger: silentLogger,
    probeMs: 1_000,
    idleProbeMs: 15_000,
  });
  return { ...c, reporter, sent };
}

describe("EndpointReporter", () => {
  it("probes again soon while it cannot tell (no running container yet, or the probe failed), and rarely once every port is ready", async () => {
    const { reporter, fire, next, sent } = setup([undefined, new Error("docker is busy"), [{ port: 8080, ready: false }], [{ port: 8080, ready: true }]]);
    reporter.start();
    await fire(); // no running container yet
    expect(sent).toEqual([]);
    expect(next()).toBe(1_000);
    await fire(); // the probe failed
    expect(next()).toBe(1_000);
    await fire(); // running, not listening yet
    expect(sent).toEqual([{ type: "endpoints", deploymentId: "dep_1", ports: [{ port: 8080, ready: false }] }]);
    expect(next()).toBe(1_000);
    await fire(); // listening
    expect(sent.at(-1)).toEqual({ type: "endpoints", deploymentId: "dep_1", ports: [{ port: 8080, ready: true }] });
    expect(next()).toBe(15_000);
  });

  it("waits the idle interval for a running deployment that exposes no port", async () => {
    const { reporter, fire, next, sent } = setup([[]]);
    reporter.start();
    await fire();
    expect(sent).toEqual([]);
    expect(next()).toBe(15_000);
  });
});
