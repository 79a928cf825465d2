// Issue 41: periodic work is done once. Three control-plane processes on one
// real PostgreSQL, agents spread over them, each running deployments at odd
// hourly rates; one replica is killed outright mid-way and its agents move to
// the others. Every deployment must be charged exactly floor(rate x seconds /
// 3600) of the time its agent proved, by one charge per stretch, never twice,
// and the books must hold.
import { needs } from "@cm/testkit";
import { expect, it } from "vitest";
import { runMeteredFleet } from "./support/metered-fleet";

needs("postgres").describe("metering with three replicas, one killed", () => {
  it("charges each deployment exactly its proven time, once, and the books hold", async () => {
    const r = await runMeteredFleet({ replicas: 3, nodesPerReplica: 2, deploymentsPerNode: 2, runMs: 16_000, killAtMs: 8_000 });
    console.log(JSON.stringify({ seconds: r.seconds.toFixed(1), killed: r.killed, deployments: r.deployments.length }));
    expect(r.killed.agents).toBe(2);
    expect(r.deployments.filter((d) => d.moved)).toHaveLength(4);
    for (const d of r.deployments) {
      const seen = d;
      // Exactly the formula over what was billed, and that is what the ledger holds, stretch by stretch.
      expect(d.totalCostMicro, JSON.stringify(seen)).toBe(d.exactMicro);
      expect(d.ledgerMicro, JSON.stringify(seen)).toBe(d.totalCostMicro);
      expect(d.describedMs, JSON.stringify(seen)).toBe(d.billedMs);
      // Never past what the agent proved (a second replica charging the same time would be), and no proven time lost but a dead replica's last seconds.
      expect(d.billedMs, JSON.stringify(seen)).toBeLessThanOrEqual(d.provenMaxMs);
      expect(d.billedMs, JSON.stringify(seen)).toBeGreaterThanOrEqual(d.provenMinMs);
      expect(d.totalCostMicro).toBeGreaterThan(0);
      // Charged as it ran, on whichever replica held it after the kill.
      expect(d.lagMs, JSON.stringify(seen)).toBeLessThan(4000);
    }
    expect(r.broken).toEqual([]);
  }, 90_000);
});
