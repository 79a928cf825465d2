import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Agent, createAgent } from "../../../agent/src/agent";
import { systemClock as agentClock } from "../../../agent/src/clock";
import { parseAgentConfig } from "../../../agent/src/config";
import { wsSocketFactory } from "../../../agent/src/connection/socket";
import { silentLogger } from "../../../agent/src/logger";
import { ImageUnavailableError } from "../../../agent/src/runtime/errors";
import { FAST_TIMING, fakeHostProbe } from "../../../agent/test/support/agent-harness";
import { MemoryRuntime } from "../../../agent/test/support/memory-runtime";
import { systemClock } from "../../src/services/ids";
import { type Harness, startHarness } from "../support/harness";
import { until } from "../support/until";

// Issue 36: a registry that answered a pull with 3,000 emoji. The agent cut the reason inside a
// surrogate pair, the control plane refused the frame, and the deployment stayed `pulling` for
// good, holding its node. The real control plane and the real agent on a real socket, the
// agent's engine in memory (the registry's answer is what it says): no Docker needed.

const IMAGE = "registry.example/emoji:1";
const REGISTRY_ANSWER = "😀".repeat(3000);

describeEachDatabase("a pull failure in hostile text, through the real agent, on $name", (db) => {
  let h: Harness;
  let agent: Agent | undefined;

  beforeAll(async () => {
    // The system clock: the agent's reports carry its own.
    h = await startHarness(db, { overrides: { clock: systemClock } });
  });
  afterAll(async () => {
    await agent?.stop();
    await h?.close();
  });

  it("fails the deployment with the registry's words, cut on whole characters, instead of leaving it pulling", async () => {
    const operator = await h.signIn();
    const node = await h.call("POST", "/operator/nodes", {
      token: operator.token,
      body: { name: "emoji", region: "eu-west", country: "DE", hourlyRateCents: 36, maxDeployments: 2 },
    });
    const nodeId = node.json.node.id as string;
    const engine = new MemoryRuntime(agentClock).failNext("ensureImage", new ImageUnavailableError(IMAGE, REGISTRY_ANSWER));
    agent = createAgent(
      parseAgentConfig({ controlPlaneUrl: h.url, token: node.json.agentToken, containerLabels: { "cm.test-run": "hostile-reasons" }, timing: FAST_TIMING }),
      { runtime: engine, hostProbe: fakeHostProbe(), socketFactory: wsSocketFactory(), clock: agentClock, logger: silentLogger },
    );
    await agent.start();
    await until("the node online", async () => (await h.call("GET", `/nodes/${nodeId}`)).json.node.status === "online");

    const tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 1_000);
    const created = await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId, customImage: IMAGE } });
    expect(created.status).toBe(201);
    const id = created.json.deployment.id as string;
    const deployment = async () => (await h.call("GET", `/deployments/${id}`, { token: tenant.token })).json.deployment;
    const failed = await until("the deployment failed", async () => {
      const d = await deployment();
      return d.status === "failed" && d;
    });

    const whole = new ImageUnavailableError(IMAGE, REGISTRY_ANSWER).message;
    const reason = failed.statusReason as string;
    expect(whole.startsWith(reason)).toBe(true);
    expect(reason.length).toBeGreaterThan(1997);
    expect(reason.length).toBeLessThanOrEqual(2000);
    expect(reason.endsWith("😀")).toBe(true);
    // Its slot is free again, and the agent still connected (no frame was refused).
    expect((await h.call("GET", `/nodes/${nodeId}`)).json.node).toMatchObject({ status: "online", activeDeployments: 0 });
  });
});
