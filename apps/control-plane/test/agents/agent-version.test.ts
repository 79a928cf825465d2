// The agent's version at hello, as its operator sees it (issue 28): the node list shows
// it and flags an agent older than the control plane recommends or supports.
import { RECOMMENDED_AGENT_VERSION } from "@cm/protocol";
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type AgentHarness, eventually, startAgentHarness } from "./support/agent-harness";
import { SimAgent } from "./support/sim-agent";

describeEachDatabase("agents' versions in the operator's node list on $name", (db) => {
  let h: AgentHarness;
  let op: Awaited<ReturnType<AgentHarness["signIn"]>>;

  beforeAll(async () => {
    h = await startAgentHarness(db);
    op = await h.signIn();
  });
  afterAll(() => h.close());

  const register = async (name: string) => {
    const r = await h.call("POST", "/operator/nodes", {
      token: op.token,
      body: { name, region: "eu-west", country: "DE", hourlyRateCents: 50, maxDeployments: 4 },
    });
    expect(r.status).toBe(201);
    // Registration answers the node as the catalogue shows it: nothing of an agent yet.
    expect(r.json.node).not.toHaveProperty("agentVersion");
    return { id: r.json.node.id as string, token: r.json.agentToken as string };
  };
  const listed = async (id: string) =>
    ((await h.call("GET", "/operator/nodes", { token: op.token })).json.nodes as Array<Record<string, unknown>>).find((n) => n.id === id)!;

  it("no agent yet: no version and nothing to judge", async () => {
    const n = await register("never-connected");
    expect(await listed(n.id)).toMatchObject({ agentVersion: null, agentUpdate: null });
  });

  it("shows what each agent said at hello, and whether to upgrade it; a reconnect with a newer agent clears the flag", async () => {
    const old = await register("old-agent");
    const current = await register("current-agent");
    const ancient = await register("ancient-agent");
    const a = await SimAgent.connect(h.url, old.token, { agentVersion: "0.1.9" });
    const b = await SimAgent.connect(h.url, current.token, { agentVersion: `${RECOMMENDED_AGENT_VERSION}+build.7` });
    const c = await SimAgent.connect(h.url, ancient.token, { agentVersion: "0.0.1" });
    await eventually(async () => expect((await listed(old.id)).agentVersion).toBe("0.1.9"));
    expect(await listed(old.id)).toMatchObject({ agentVersion: "0.1.9", agentUpdate: "recommended" });
    expect(await listed(current.id)).toMatchObject({ agentVersion: `${RECOMMENDED_AGENT_VERSION}+build.7`, agentUpdate: "none" });
    expect(await listed(ancient.id)).toMatchObject({ agentVersion: "0.0.1", agentUpdate: "required" });
    // The catalogue is the tenants': the operator's agent is not their business.
    expect((await h.call("GET", `/nodes/${old.id}`)).json.node).not.toHaveProperty("agentVersion");

    // The operator upgrades: the next hello says the new version.
    a.agent.close();
    const upgraded = await SimAgent.connect(h.url, old.token, { agentVersion: RECOMMENDED_AGENT_VERSION });
    await eventually(async () => expect(await listed(old.id)).toMatchObject({ agentVersion: RECOMMENDED_AGENT_VERSION, agentUpdate: "none" }));
    for (const agent of [upgraded.agent, b.agent, c.agent]) agent.close();
  });
});
