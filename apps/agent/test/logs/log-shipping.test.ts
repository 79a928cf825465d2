// Log shipping as the agent runs it (through the reconciler, over the in-memory
// engine's Docker-like log, on a fake clock): what the control plane stores is
// every line once, in order, numbered without gaps, across polls, reconnects,
// unanswered frames and new runs. Real Docker's logs are in
// test/agent/logs-while-away.test.ts and test/agent/restart.test.ts.
import { describe, expect, it } from "vitest";
import { IMAGE, reconcilerHarness, spec } from "../support/reconciler-harness";

async function running(deploymentId: string, options: Parameters<typeof reconcilerHarness>[0] = {}) {
  const h = reconcilerHarness(options);
  h.engine.loadImage(IMAGE);
  await h.settle(h.reconciler.sync([spec(deploymentId)]));
  return { ...h, container: `cm-${deploymentId}-run1` };
}

const numbered = (count: number, from = 1) => Array.from({ length: count }, (_, i) => `line ${from + i}`);

describe("log shipping", () => {
  it("ships every line once and in order, stdout and stderr as written, while the container keeps writing", async () => {
    const h = await running("dep_chatty");
    const written: string[] = [];
    for (let burst = 0; burst < 40; burst++) {
      // Many lines in the same millisecond: only Docker's nanoseconds tell them apart.
      for (let i = 0; i < 37; i++) {
        const stream = i % 5 === 0 ? "stderr" : "stdout";
        const message = `line ${written.length + 1}`;
        h.engine.write(h.container, message, stream);
        written.push(`${stream} ${message}`);
      }
      await h.clock.advance(30);
    }
    await h.clock.advanceUntil(() => h.storedLines("dep_chatty").length === written.length, "every line stored");
    await h.clock.advance(5_000);

    const stored = h.storedLines("dep_chatty");
    expect(stored.map((l) => `${l.stream} ${l.message}`)).toEqual(written);
    expect(stored.map((l) => l.seq)).toEqual(written.map((_, i) => i + 1));
    expect(h.duplicateLines).toBe(0);
    // Each line keeps Docker's timestamp, the resume point after a reconnect.
    expect(stored.at(-1)!.ts).toBe(h.engine.container(h.container).log.at(-1)!.dockerTimestamp);
  });

  it("loses nothing when the connection drops: the next sync resumes after what the control plane stored", async () => {
    const h = await running("dep_flaky");
    for (const line of numbered(100)) h.engine.write(h.container, line);
    await h.clock.advanceUntil(() => h.storedLines("dep_flaky").length === 100, "the first 100 lines");

    // Unanswered frames are lost with the connection, and the container writes on meanwhile.
    h.link.acking = false;
    for (const line of numbered(30, 101)) h.engine.write(h.container, line);
    await h.clock.advance(1_000);
    h.disconnect();
    for (const line of numbered(20, 131)) h.engine.write(h.container, line);
    await h.clock.advance(10_000);

    h.link.connected = true;
    h.link.acking = true;
    await h.settle(h.reconciler.sync([spec("dep_flaky", { logCursor: h.cursor("dep_flaky") })]));
    await h.clock.advanceUntil(() => h.storedLines("dep_flaky").length === 150, "all 150 lines");

    expect(h.storedLines("dep_flaky").map((l) => `${l.seq} ${l.message}`)).toEqual(numbered(150).map((line, i) => `${i + 1} ${line}`));
    expect(h.duplicateLines).toBe(0);
  });

  it("sends a batch again when the control plane leaves it unanswered, and stores it once", async () => {
    const h = await running("dep_slow_db");
    h.link.acking = false;
    for (const line of numbered(10)) h.engine.write(h.container, line);
    await h.clock.advance(1_000);
    const logFrames = () => h.sent.filter((f) => f.type === "logs");
    expect(logFrames()).toHaveLength(1);

    await h.clock.advance(h.timing.logAckTimeoutMs);
    expect(logFrames()).toHaveLength(2);
    expect(logFrames()[1]).toEqual(logFrames()[0]);
    h.answerPending();
    h.link.acking = true;
    for (const line of numbered(5, 11)) h.engine.write(h.container, line);
    await h.clock.advanceUntil(() => h.storedLines("dep_slow_db").length === 15, "all 15 lines");
    expect(h.storedLines("dep_slow_db").map((l) => l.message)).toEqual(numbered(15));
  });

  it("stops reading while too many lines are unacknowledged, and catches up once they are", async () => {
    const h = await running("dep_burst", { timing: { logBatchLines: 100, logMaxInflightLines: 200 } });
    h.link.acking = false;
    for (const line of numbered(1_000)) h.engine.write(h.container, line);
    await h.clock.advance(5_000);
    const sentLines = () => h.sent.flatMap((f) => (f.type === "logs" ? f.lines : []));
    expect(sentLines()).toHaveLength(200);

    h.link.acking = true;
    h.answerPending();
    await h.clock.advanceUntil(() => h.storedLines("dep_burst").length === 1_000, "all 1000 lines");
    expect(h.storedLines("dep_burst").map((l) => l.message)).toEqual(numbered(1_000));
    expect(Math.max(...h.sent.map((f) => (f.type === "logs" ? f.lines.length : 0)))).toBe(100);
  });

  it("numbers a new run's lines after the last run's, even when the cursor it comes with lags", async () => {
    const h = await running("dep_rerun");
    for (const line of numbered(10)) h.engine.write(h.container, line);
    await h.clock.advanceUntil(() => h.storedLines("dep_rerun").length === 10, "run 1's lines");

    const staleCursor = { seq: 4, dockerTs: h.storedLines("dep_rerun")[3]!.ts };
    await h.settle(h.reconciler.command("start", spec("dep_rerun", { runSeq: 2, logCursor: staleCursor })));
    for (const line of ["run 2 says hello", "run 2 says bye"]) h.engine.write("cm-dep_rerun-run2", line);
    await h.clock.advanceUntil(() => h.storedLines("dep_rerun").length === 12, "run 2's lines");

    expect(
      h
        .storedLines("dep_rerun")
        .slice(-3)
        .map((l) => `${l.seq} ${l.message}`),
    ).toEqual(["10 line 10", "11 run 2 says hello", "12 run 2 says bye"]);
    expect(h.duplicateLines).toBe(0);
  });

  it("reports an exit at most 2 s late when the control plane takes no lines, stamped when the container ended", async () => {
    const h = await running("dep_stuck");
    h.link.acking = false;
    h.engine.write(h.container, "bye");
    const endedAtMs = h.clock.now();
    h.engine.exit(h.container, 0);
    await h.clock.advance(1_900);
    expect(h.lastStatus("dep_stuck")?.status).toBe("running");
    await h.clock.advance(200);
    expect(h.lastStatus("dep_stuck")).toMatchObject({ status: "exited", exitCode: 0, at: endedAtMs });
  });
});
