// A pull holds the node's GPUs and cores without being billed: it ends at its
// deadline (AGENT_PULL_TIMEOUT_S), after a stall (AGENT_PULL_STALL_S), and at
// once when the tenant stops or deletes the deployment. Against real Docker and
// a registry that trickles, in test/agent/pull-limits.test.ts.
import { describe, expect, it } from "vitest";
import { IMAGE, reconcilerHarness, spec } from "../support/reconciler-harness";

const limits = { timeoutMs: 600_000, stallMs: 60_000 };

describe("a pull's limits", () => {
  it("fails a deployment whose registry stops sending once the stall limit passes, saying so", async () => {
    const h = reconcilerHarness({ pullLimits: limits });
    h.engine.publish(IMAGE, { layers: 3, pullMs: 3_000, stalls: true });
    const create = h.reconciler.command("create", spec("dep_stall"));
    await h.clock.advance(59_000);
    expect(h.statuses("dep_stall")).toEqual(["1:pulling"]);
    const result = await h.settle(create, 5_000);
    expect(result.ok).toBe(false);
    expect(h.lastStatus("dep_stall")).toMatchObject({
      status: "failed",
      reason: `the pull of image "${IMAGE}" made no progress for 60 s (the node's limit, AGENT_PULL_STALL_S): the registry stopped sending; the deployment holds nothing now`,
    });
    expect(h.engine.ps()).toEqual([]);
  });

  it("fails a pull that progresses but does not finish by the deadline", async () => {
    const h = reconcilerHarness({ pullLimits: { timeoutMs: 100_000, stallMs: 60_000 } });
    // A layer every 50 s: never a stall, and 10 layers take 500 s.
    h.engine.publish(IMAGE, { layers: 10, pullMs: 500_000 });
    const result = await h.settle(h.reconciler.command("create", spec("dep_slow")), 200_000);
    expect(result.ok).toBe(false);
    expect(h.lastStatus("dep_slow")?.reason).toBe(
      `the pull of image "${IMAGE}" did not finish within 100 s (the node's limit, AGENT_PULL_TIMEOUT_S); the deployment holds nothing now`,
    );
  });

  it("a stop or a delete during a pull ends it at once and starts nothing", async () => {
    for (const action of ["stop", "remove"] as const) {
      const h = reconcilerHarness({ pullLimits: limits });
      h.engine.publish(IMAGE, { layers: 3, pullMs: 3_000, stalls: true });
      const create = h.reconciler.command("create", spec(`dep_${action}`));
      await h.clock.advance(5_000);
      const ended = await h.settle(h.reconciler.command(action, spec(`dep_${action}`)), 1_000);
      expect(ended).toEqual({ ok: true });
      expect(await create).toEqual({ ok: true });
      await h.clock.advance(120_000);
      expect(h.engine.ps()).toEqual([]);
      expect(h.statuses(`dep_${action}`)).toEqual(["1:pulling", action === "stop" ? "1:stopped" : "1:removed"]);
    }
  });

  it("the same run sent again during its pull (a sync after a reconnect) lets the pull go on", async () => {
    const h = reconcilerHarness({ pullLimits: limits });
    h.engine.publish(IMAGE, { layers: 4, pullMs: 8_000 });
    const create = h.reconciler.command("create", spec("dep_sync"));
    await h.clock.advance(3_000);
    const again = h.reconciler.sync([spec("dep_sync")]);
    await h.settle(Promise.all([create, again]));
    expect(h.engine.pulls).toEqual([IMAGE]);
    expect(h.engine.ps().map((c) => [c.name, c.state.running])).toEqual([["cm-dep_sync-run1", true]]);
  });
});
