// A restart's backoff on the node: a run the control plane's restart policy
// began (startDelayMs in its spec) starts only once the wait is over, and a
// stop or removal meanwhile is carried out at once, starting nothing.
import { describe, expect, it } from "vitest";
import { IMAGE, reconcilerHarness, spec } from "../support/reconciler-harness";

describe("a restart's backoff", () => {
  it("starts the new run only after startDelayMs, the old run's container removed meanwhile", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    await h.settle(h.reconciler.sync([spec("dep_crash")]));
    const restart = h.reconciler.command("start", spec("dep_crash", { runSeq: 2, startDelayMs: 4_000 }));
    await h.clock.advance(3_900);
    expect(h.engine.ps().filter((c) => c.state.running)).toEqual([]);
    expect(h.statuses("dep_crash")).toEqual(["1:starting", "1:running"]);
    expect(await h.settle(restart)).toEqual({ ok: true });
    expect(h.engine.ps().map((c) => [c.name, c.state.running])).toEqual([["cm-dep_crash-run2", true]]);
    expect(h.statuses("dep_crash")).toEqual(["1:starting", "1:running", "2:starting", "2:running"]);
  });

  it("the same run sent again while it waits (a sync after a reconnect) waits only what is left", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    const first = h.reconciler.command("start", spec("dep_sync", { runSeq: 2, startDelayMs: 8_000 }));
    await h.clock.advance(6_000);
    const again = h.reconciler.sync([spec("dep_sync", { runSeq: 2, startDelayMs: 8_000 })]);
    await h.clock.advance(2_100);
    await first;
    await h.settle(again, 1_000);
    expect(h.engine.ps().map((c) => [c.name, c.state.running])).toEqual([["cm-dep_sync-run2", true]]);
  });

  it("a stop while the restart waits is carried out at once and starts nothing", async () => {
    const h = reconcilerHarness();
    h.engine.loadImage(IMAGE);
    const restart = h.reconciler.command("start", spec("dep_stop", { runSeq: 2, startDelayMs: 30_000 }));
    await h.clock.advance(1_000);
    const stop = await h.settle(h.reconciler.command("stop", spec("dep_stop", { runSeq: 2 })), 1_000);
    expect(stop).toEqual({ ok: true });
    expect(await restart).toEqual({ ok: true });
    await h.clock.advance(60_000);
    expect(h.engine.ps()).toEqual([]);
    expect(h.statuses("dep_stop")).toEqual(["2:stopped"]);
  });
});
