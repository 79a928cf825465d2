import { randomBytes } from "node:crypto";
import type { TestDatabase } from "@cm/db/testing";
import { runProgram } from "@cm/testkit/run-program";
import { type Agent, createAgent } from "../../../../agent/src/agent";
import { systemClock } from "../../../../agent/src/clock";
import { type AgentConfigInput, parseAgentConfig } from "../../../../agent/src/config";
import { wsSocketFactory } from "../../../../agent/src/connection/socket";
import { SystemHostProbe } from "../../../../agent/src/host/probe";
import { createLogger } from "../../../../agent/src/logger";
import { DockerRuntime } from "../../../../agent/src/runtime/docker-runtime";
import type { Config } from "../../../src/config";
import type { DepsOverrides } from "../../../src/deps";
import { systemClock as cpClock } from "../../../src/services/ids";
import { type Harness, startHarness } from "../../support/harness";

/**
 * The whole product on one machine: the real control plane on a real socket
 * (system clock, short timers) and a real agent in-process driving the real
 * Docker engine. Containers carry a per-run label so cleanup never touches
 * anyone else's.
 */
export async function startSystem(db: TestDatabase, config: Partial<Config> = {}, overrides: DepsOverrides = {}) {
  const h = await startHarness(db, {
    // Heartbeats at 5 s (a node is lost after 15 s of silence): the control plane, the
    // agent and the test share this process, and a stall of a few seconds on a busy
    // 2-core machine must not read as a lost node. No test here waits on heartbeats.
    config: { HEARTBEAT_INTERVAL_MS: 5_000, METER_INTERVAL_MS: 1_000, ACCESS_TOKEN_TTL_S: 3600, GATEWAY_RESPONSE_TIMEOUT_MS: 1_500, ...config },
    overrides: { clock: cpClock, ...overrides },
  });
  const runLabel = { "cm.test-run": `e2e-${randomBytes(4).toString("hex")}` };
  const operator = await h.signIn();
  const node = await h.call("POST", "/operator/nodes", {
    token: operator.token,
    body: { name: "e2e", region: "eu-west", country: "DE", hourlyRateCents: 36, maxDeployments: 8 },
  });
  const agents: Agent[] = [];
  // The agents' own log, kept (not printed) so a wait that times out can say what they did.
  const agentLines: string[] = [];
  const logger = createLogger({
    level: "debug",
    write: (line) => {
      agentLines.push(line);
      if (agentLines.length > 400) agentLines.splice(0, 100);
    },
  });

  /** An agent for the node; `config` what its operator set in agent.env (AGENT_PULL_STALL_S as pullStallS, ...). */
  function agent(config: Partial<AgentConfigInput> = {}) {
    const runtime = new DockerRuntime({ logger });
    const a = createAgent(
      parseAgentConfig({
        controlPlaneUrl: h.url,
        token: node.json.agentToken,
        containerLabels: runLabel,
        timing: { backoffInitialMs: 50, backoffMaxMs: 500, pingIntervalMs: 500, pongTimeoutMs: 5_000, containerStopTimeoutS: 2 },
        ...config,
      }),
      { runtime, hostProbe: new SystemHostProbe({ dockerEngine: () => runtime.engineInfo() }), socketFactory: wsSocketFactory(), clock: systemClock, logger },
    );
    agents.push(a);
    return a;
  }

  return {
    h,
    nodeId: node.json.node.id as string,
    agentToken: node.json.agentToken as string,
    /** The node's operator, signed in. */
    operatorToken: operator.token,
    runLabel,
    agent,
    /** The agents' newest log lines, oldest first. */
    agentLog: () => agentLines.join("\n"),
    /** For `until`'s timeout message: the deployment as its tenant sees it, and the agents' newest log lines. */
    explain: (deploymentId: string, token: string) => async () => {
      const d = (await h.call("GET", `/deployments/${deploymentId}`, { token })).json.deployment;
      return `deployment: ${JSON.stringify(d)}\nagent log (newest last):\n${agentLines.slice(-60).join("\n")}`;
    },
    /** Stops every agent as SIGTERM would: the containers keep running. */
    async stopAgents() {
      await Promise.all(agents.splice(0).map((a) => a.stop()));
    },
    async close() {
      await Promise.all(agents.map((a) => a.stop().catch(() => undefined)));
      await h.close();
      await removeLabelled(`cm.test-run=${runLabel["cm.test-run"]}`);
    },
  };
}
export type System = Awaited<ReturnType<typeof startSystem>>;

/**
 * Removes the containers, then the networks, carrying a label (`key=value`): what
 * a test's agents left. One at a time and tolerant: an agent stopping at the same
 * moment may be removing one already ("removal already in progress"), which made
 * a whole `docker rm -f` fail; what is still there is tried again for a few seconds.
 */
export async function removeLabelled(label: string) {
  const list = async (args: string[]) => (await runProgram("docker", [...args, "--filter", `label=${label}`])).split("\n").filter(Boolean);
  const tolerant = (args: string[]) => runProgram("docker", args).catch(() => undefined);
  for (let attempt = 0; attempt < 10; attempt++) {
    for (const id of await list(["ps", "-aq"])) await tolerant(["rm", "-f", id]);
    for (const net of await list(["network", "ls", "-q"])) await tolerant(["network", "rm", net]);
    if ((await list(["ps", "-aq"])).length === 0 && (await list(["network", "ls", "-q"])).length === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

export { until } from "../../support/until";

export type { Harness };
