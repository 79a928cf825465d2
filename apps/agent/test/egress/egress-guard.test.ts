// The guard's decisions against a scripted firewall and a fake clock: when
// deployments are admitted, and how the policy is kept in place over time.
import { describe, expect, it } from "vitest";
import { EgressGuard, EgressRefusedError } from "../../src/egress/egress-guard";
import type { Firewall } from "../../src/egress/iptables";
import { silentLogger } from "../../src/logger";
import { FakeClock } from "../support/fake-clock";
import { MemoryRuntime } from "../support/memory-runtime";

/** Installs when asked unless `failing` says why not; `tamper()` takes the policy away as a Docker restart would. */
function scriptedFirewall() {
  let installed = false;
  const fw = {
    failing: undefined as string | undefined,
    ensures: 0,
    tamper: () => {
      installed = false;
    },
    async ensure() {
      fw.ensures += 1;
      if (fw.failing) throw new Error(fw.failing);
      const changed = !installed;
      installed = true;
      return { changed };
    },
    async check() {
      return installed ? [] : ["missing"];
    },
    async remove() {
      installed = false;
    },
  };
  return fw satisfies Firewall & Record<string, unknown>;
}

describe("EgressGuard", () => {
  it("installs at start and admits deployments while the policy is in place", async () => {
    const firewall = scriptedFirewall();
    const guard = new EgressGuard({ firewall, enabled: true, clock: new FakeClock(), logger: silentLogger });
    expect(await guard.start()).toEqual({ mode: "enforced" });
    await expect(guard.admit()).resolves.toBeUndefined();
    guard.stop();
  });

  it("refuses deployments while it cannot install the policy, and admits again once it can", async () => {
    const firewall = scriptedFirewall();
    firewall.failing = "iptables is not installed";
    const guard = new EgressGuard({ firewall, enabled: true, clock: new FakeClock(), logger: silentLogger });
    expect(await guard.start()).toEqual({ mode: "missing", reason: "iptables is not installed" });
    const refusal = await guard.admit().catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(EgressRefusedError);
    expect((refusal as Error).message).toBe(
      "this node cannot enforce its network policy (iptables is not installed), so it runs no deployments until its operator fixes it",
    );
    firewall.failing = undefined;
    // A deployment arriving after the fix tries once more itself, without waiting for the interval.
    await expect(guard.admit()).resolves.toBeUndefined();
    expect(guard.state).toEqual({ mode: "enforced" });
    guard.stop();
  });

  it("puts the policy back on its interval after something took it away", async () => {
    const clock = new FakeClock();
    const firewall = scriptedFirewall();
    const guard = new EgressGuard({ firewall, enabled: true, clock, logger: silentLogger, checkIntervalMs: 30_000 });
    await guard.start();
    firewall.tamper();
    expect(await firewall.check()).toEqual(["missing"]);
    await clock.advance(30_000);
    expect(await firewall.check()).toEqual([]);
    expect(firewall.ensures).toBe(2);
    guard.stop();
    await clock.advance(120_000);
    expect(firewall.ensures).toBe(2);
  });

  it("puts the policy back as soon as Docker comes back, without waiting for the interval", async () => {
    const clock = new FakeClock();
    const engine = new MemoryRuntime(clock);
    const firewall = scriptedFirewall();
    const guard = new EgressGuard({ firewall, enabled: true, clock, logger: silentLogger, checkIntervalMs: 30_000, engine });
    await guard.start();
    // dockerd rewrote its chains as it started, and answers again.
    firewall.tamper();
    engine.restartDaemon();
    await clock.advance(0);
    expect(await firewall.check()).toEqual([]);
    expect(firewall.ensures).toBe(2);
    guard.stop();
    engine.restartDaemon();
    await clock.advance(0);
    expect(firewall.ensures).toBe(2);
  });

  it("checks once more when Docker comes back during a check, which may have looked before Docker rewrote its chains", async () => {
    const clock = new FakeClock();
    const engine = new MemoryRuntime(clock);
    const firewall = scriptedFirewall();
    const guard = new EgressGuard({ firewall, enabled: true, clock, logger: silentLogger, checkIntervalMs: 30_000, engine });
    await guard.start();
    let release!: () => void;
    const answered = new Promise<void>((resolve) => (release = resolve));
    const ensure = firewall.ensure;
    // This check finds the policy in place, then is slow to answer.
    firewall.ensure = async () => {
      const result = await ensure();
      await answered;
      return result;
    };
    const underWay = guard.ensure();
    await clock.advance(0);
    firewall.tamper();
    engine.restartDaemon();
    release();
    await underWay;
    await clock.advance(0);
    expect(await firewall.check()).toEqual([]);
    expect(firewall.ensures).toBe(3);
    guard.stop();
  });

  it("touches nothing and admits everything when the operator turned it off, and says so", async () => {
    const firewall = scriptedFirewall();
    firewall.failing = "would fail";
    const clock = new FakeClock();
    const engine = new MemoryRuntime(clock);
    const guard = new EgressGuard({ firewall, enabled: false, clock, logger: silentLogger, engine });
    expect(await guard.start()).toEqual({ mode: "off" });
    await expect(guard.admit()).resolves.toBeUndefined();
    engine.restartDaemon();
    await clock.advance(0);
    expect(firewall.ensures).toBe(0);
    guard.stop();
  });
});
