import type { DeploymentRow, LogRow, Repos } from "@cm/db";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { DeploymentWatch } from "../../src/services/deployment-watch";
import { EventBus } from "../../src/services/events";
import { systemClock } from "../../src/services/ids";
import { createLogger } from "../../src/services/logger";
import { TestClock } from "../support/harness";

// The watch against a store that counts its reads and answers when the test says:
// what one follower or a thousand cost the database.

type Pending<T> = { resolve(v: T): void };

function fakeStore() {
  const rowReads: Array<Pending<DeploymentRow | undefined>> = [];
  const lineReads: Array<Pending<LogRow[]> & { afterSeq: number }> = [];
  const repos = {
    deployments: { get: () => new Promise((resolve) => rowReads.push({ resolve })) },
    logs: { after: (_id: string, afterSeq: number) => new Promise((resolve) => lineReads.push({ resolve, afterSeq })) },
  } as unknown as Repos;
  return { repos, rowReads, lineReads };
}

const row = (status: DeploymentRow["status"], totalCostMicro = 0) => ({ id: "dep_1", status, totalCostMicro, deletedAt: null }) as DeploymentRow;

describe("DeploymentWatch", () => {
  let events: EventBus;
  let store: ReturnType<typeof fakeStore>;
  let watch: DeploymentWatch;
  beforeEach(() => {
    vi.useFakeTimers();
    events = new EventBus();
    store = fakeStore();
    watch = new DeploymentWatch({ repos: store.repos, events, log: createLogger("silent"), clock: systemClock, coalesceMs: 100, fallbackMs: 60_000 });
  });
  afterEach(() => vi.useRealTimers());

  it("answers a burst of notices for 1,000 followers with one read, handed to each", async () => {
    const seen: Array<Array<DeploymentRow | undefined>> = Array.from({ length: 1000 }, () => []);
    const stops = seen.map((s) => watch.onRow("dep_1", (r) => s.push(r)));
    for (let i = 0; i < 50; i++) events.emit("deployment-touched", "dep_1");
    await vi.advanceTimersByTimeAsync(100);
    expect(store.rowReads).toHaveLength(1);
    store.rowReads[0]!.resolve(row("running", 5));
    await vi.advanceTimersByTimeAsync(0);
    expect(seen.every((s) => s.length === 1 && s[0]?.totalCostMicro === 5)).toBe(true);
    for (const stop of stops) stop();
    events.emit("deployment-touched", "dep_1");
    await vi.advanceTimersByTimeAsync(100);
    expect(store.rowReads).toHaveLength(1);
  });

  it("drops a read that a move overtook, and reads again", async () => {
    const seen: Array<DeploymentRow | undefined> = [];
    watch.onRow("dep_1", (r) => seen.push(r));
    events.emit("deployment-touched", "dep_1");
    await vi.advanceTimersByTimeAsync(100);
    // The move lands while the read is under way; the read may have started before it.
    events.emit("deployment-changed", row("stopping"));
    store.rowReads[0]!.resolve(row("running"));
    await vi.advanceTimersByTimeAsync(0);
    expect(store.rowReads).toHaveLength(2);
    store.rowReads[1]!.resolve(row("stopping"));
    await vi.advanceTimersByTimeAsync(0);
    expect(seen.map((r) => r?.status)).toEqual(["stopping", "stopping"]);
  });

  it("has the followers a line wakes share one read of it, and a newer line's wake-up read again", async () => {
    let woken = 0;
    for (let i = 0; i < 1000; i++) watch.onLines("dep_1", () => woken++);
    events.emit("logs-stored", "dep_1");
    expect(woken).toBe(1000);
    const answers = Array.from({ length: 1000 }, () => watch.readLines("dep_1", 7, 1000));
    expect(store.lineReads).toHaveLength(1);
    // Stored while that read runs: it may have missed it, so the next ask is a read of its own.
    events.emit("logs-stored", "dep_1");
    void watch.readLines("dep_1", 7, 1000);
    expect(store.lineReads).toHaveLength(2);
    store.lineReads[0]!.resolve([{ seq: 8 } as LogRow]);
    expect((await Promise.all(answers)).every((rows) => rows[0]?.seq === 8)).toBe(true);
  });
});

describe("DeploymentWatch's fallback read, on a clock the test moves", () => {
  // The store as the fallback sees it: line ids in insertion order, per deployment; rows by id.
  const lines: Array<{ id: number; deploymentId: string }> = [];
  const deleted = new Set<string>();
  let reads = 0;
  const repos = {
    deployments: {
      watched: async (ids: readonly string[], afterLogId: number, newerThanLogId: number) => {
        reads++;
        const count = (id: string, after: number) => lines.filter((l) => l.deploymentId === id && l.id > after).length;
        return {
          rows: ids.map((id) => ({
            row: { id, status: "running", deletedAt: deleted.has(id) ? 1 : null } as DeploymentRow,
            stored: count(id, afterLogId),
            storedNewer: count(id, newerThanLogId),
          })),
          newestLogId: Math.max(0, ...lines.map((l) => l.id)),
        };
      },
    },
  } as unknown as Repos;

  it("reads every watched deployment in one query a period, and wakes only the followers of those with lines stored since", async () => {
    const clock = new TestClock(0, { manual: true });
    const watch = new DeploymentWatch({ repos, events: new EventBus(), log: createLogger("silent"), clock, fallbackMs: 1_000 });
    const woken = new Map<string, number>();
    const rows: Array<DeploymentRow | undefined> = [];
    const ids = Array.from({ length: 20 }, (_, i) => `dep_${i}`);
    for (const id of ids) for (let f = 0; f < 3; f++) watch.onLines(id, () => woken.set(id, (woken.get(id) ?? 0) + 1));
    watch.onRow("dep_0", (r) => rows.push(r));
    const period = async () => {
      clock.advance(1_000);
      await new Promise((r) => setImmediate(r));
    };

    // The first read knows nothing of what came before: every follower looks once.
    await period();
    expect(reads).toBe(1);
    expect([...woken.values()]).toEqual(ids.map(() => 3));
    woken.clear();

    await period();
    expect(reads).toBe(2);
    expect(woken.size).toBe(0);

    // Stored where no notice reaches: by another replica.
    lines.push({ id: 1, deploymentId: "dep_7" }, { id: 2, deploymentId: "dep_7" }, { id: 3, deploymentId: "dep_12" });
    await period();
    expect(reads).toBe(3);
    expect(Object.fromEntries(woken)).toEqual({ dep_7: 3, dep_12: 3 });
    woken.clear();

    // A line whose id was taken before the last read's newest, committed after it: still found.
    lines.push({ id: 5, deploymentId: "dep_3" });
    await period();
    lines.push({ id: 4, deploymentId: "dep_9" });
    await period();
    expect(Object.fromEntries(woken)).toEqual({ dep_3: 3, dep_9: 3 });
    expect(reads).toBe(5);

    deleted.add("dep_0");
    await period();
    expect(rows.at(-1)).toBeUndefined();
    expect(rows.at(-2)?.status).toBe("running");
  });

  it("reads 12,000 followed deployments in three statements a period, under the databases' bound on parameters", async () => {
    const clock = new TestClock(0, { manual: true });
    const watch = new DeploymentWatch({ repos, events: new EventBus(), log: createLogger("silent"), clock, fallbackMs: 1_000 });
    for (let i = 0; i < 12_000; i++) watch.onLines(`dep_many_${i}`, () => undefined);
    const before = reads;
    clock.advance(1_000);
    await new Promise((r) => setImmediate(r));
    expect(reads - before).toBe(3);
    expect(watch.fallbackReads).toBe(3);
  });
});
