import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Harness, startHarness, TestClock } from "../support/harness";

// Liveness on the one injected clock: the offline monitor's period and its
// judgement both take their time from it, so three heartbeat intervals of
// silence (30 s here) pass in no time at all, and the test never sleeps them.

const INTERVAL_MS = 10_000;

describeEachDatabase("liveness on a clock the test moves, on $name", (db) => {
  let h: Harness;
  const clock = new TestClock(Date.UTC(2026, 10, 1, 12, 0, 0), { manual: true });
  beforeAll(async () => {
    h = await startHarness(db, { config: { HEARTBEAT_INTERVAL_MS: INTERVAL_MS }, overrides: { clock } });
  });
  afterAll(() => h?.close());

  const statusOf = async (id: string) => (await h.deps.repos.nodes.get(id))?.status;
  /** The monitor's turn runs on the database: its effect is awaited (turns of the event loop), never slept for. */
  const settled = async (id: string, want: string) => {
    for (let i = 0; i < 200 && (await statusOf(id)) !== want; i++) await new Promise((r) => setImmediate(r));
    return statusOf(id);
  };

  it("keeps a silent node online for three intervals and takes it offline at the next turn, as the clock says", async () => {
    const t0 = Date.now();
    const { id } = await h.onlineNode((await h.signIn()).token);
    await h.deps.repos.nodes.markOnline(id, clock.now());
    const turns = () => h.deps.periodic.entries().find((e) => e.job === "offline-monitor")!.turns;
    expect(h.deps.periodic.entries().find((e) => e.job === "offline-monitor")?.running).toBe(true);

    clock.advance(3 * INTERVAL_MS);
    expect(turns()).toBe(3);
    // Checks run one at a time: one more, at the same time, ends after the three the clock started.
    await h.deps.agents.tick();
    expect(await statusOf(id)).toBe("online");

    clock.advance(INTERVAL_MS);
    expect(turns()).toBe(4);
    expect(await settled(id, "offline")).toBe("offline");
    // Forty seconds of the clock's time, a fraction of that of the test's.
    expect(Date.now() - t0).toBeLessThan(INTERVAL_MS);
  });
});
