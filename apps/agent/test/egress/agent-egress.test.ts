// The whole agent with an egress guard, on the fake control plane and the
// in-memory engine: a node that cannot enforce its policy starts nothing and
// says why, and a node whose operator turned the policy off says that instead.
// Its default disk allowance goes with its specs too.
import { afterEach, expect, it } from "vitest";
import type { Agent } from "../../src/agent";
import { createAgent } from "../../src/agent";
import { systemClock } from "../../src/clock";
import { wsSocketFactory } from "../../src/connection/socket";
import { EgressGuard } from "../../src/egress/egress-guard";
import type { Firewall } from "../../src/egress/iptables";
import { silentLogger } from "../../src/logger";
import { deploymentSpec, fakeHostProbe, testConfig } from "../support/agent-harness";
import { dockerTestRun } from "../support/docker-test-run";
import { FakeControlPlane } from "../support/fake-control-plane";
import { MemoryRuntime } from "../support/memory-runtime";

const run = dockerTestRun(); // labels and ids only: nothing here reaches an engine
const IMAGE = "registry.example/app:1";
let fake: FakeControlPlane;
let agent: Agent | undefined;

afterEach(async () => {
  await agent?.stop();
  agent = undefined;
  await fake?.stop();
});

/** A firewall that refuses while `broken` says why. */
function firewall(state: { broken?: string }): Firewall {
  return {
    ensure: async () => {
      if (state.broken) throw new Error(state.broken);
      return { changed: false };
    },
    check: async () => (state.broken ? [state.broken] : []),
    remove: async () => {},
  };
}

async function startAgent(guard: EgressGuard, engine: MemoryRuntime, config: Parameters<typeof testConfig>[2] = {}): Promise<Agent> {
  fake = await FakeControlPlane.start();
  agent = createAgent(testConfig(fake, run, config), {
    runtime: engine,
    hostProbe: fakeHostProbe(),
    socketFactory: wsSocketFactory(),
    clock: systemClock,
    logger: silentLogger,
    egress: guard,
  });
  await agent.start();
  await fake.waitFor(() => agent?.state === "ready", 5_000, "ready");
  return agent;
}

it("refuses deployments while the policy cannot be installed, telling the tenant why, and runs them once it can", async () => {
  const state: { broken?: string } = { broken: "iptables has no DOCKER-USER chain" };
  const guard = new EgressGuard({ firewall: firewall(state), enabled: true, clock: systemClock, logger: silentLogger });
  const engine = new MemoryRuntime(systemClock).loadImage(IMAGE, {});
  await startAgent(guard, engine);
  const refused = deploymentSpec(run, "refused", IMAGE);
  fake.desired.set(refused.deploymentId, refused);
  fake.sync();
  const report = await fake.waitFor(() => fake.statuses(refused.deploymentId).find((s) => s.status === "failed"), 5_000, "the refusal");
  expect(report.reason).toBe(
    "this node cannot enforce its network policy (iptables has no DOCKER-USER chain), so it runs no deployments until its operator fixes it",
  );
  expect(engine.ps()).toEqual([]);
  // Tenants are not told "enforced" by a node that is not.
  const specs = await fake.waitFor(() => fake.of("specs")[0], 5_000, "specs");
  expect(specs.egressPolicy).toBeUndefined();

  state.broken = undefined;
  const next = deploymentSpec(run, "admitted", IMAGE);
  fake.desired.set(next.deploymentId, next);
  fake.sync();
  await fake.waitFor(() => fake.statuses(next.deploymentId).some((s) => s.status === "running"), 5_000, "running once the policy is in");
});

it("tells the control plane when the operator turned the policy off, and runs deployments", async () => {
  const guard = new EgressGuard({ firewall: firewall({ broken: "never asked" }), enabled: false, clock: systemClock, logger: silentLogger });
  const engine = new MemoryRuntime(systemClock).loadImage(IMAGE, {});
  await startAgent(guard, engine);
  const specs = await fake.waitFor(() => fake.of("specs")[0], 5_000, "specs");
  expect(specs.egressPolicy).toBe("off");
  const spec = deploymentSpec(run, "open", IMAGE);
  fake.desired.set(spec.deploymentId, spec);
  fake.sync();
  await fake.waitFor(() => fake.statuses(spec.deploymentId).some((s) => s.status === "running"), 5_000, "running");
});

it("tells the control plane its default disk allowance, which tenants see on their custom images' deployments", async () => {
  const guard = new EgressGuard({ firewall: firewall({}), enabled: true, clock: systemClock, logger: silentLogger });
  await startAgent(guard, new MemoryRuntime(systemClock), { diskDefaultGb: 35 });
  const specs = await fake.waitFor(() => fake.of("specs")[0], 5_000, "specs");
  expect(specs).toMatchObject({ egressPolicy: "enforced", diskDefaultGb: 35 });
});
