// A node tells tenants whether its firewall keeps their containers off the
// operator's machine and network: the egress policy its agent reports with its
// specs, shown on the node in the catalogue, its detail and its operator's list.
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type AgentHarness, eventually, startAgentHarness } from "./support/agent-harness";
import { GPU, SimAgent, SPECS } from "./support/sim-agent";

describeEachDatabase("a node's egress policy on $name", (db) => {
  let h: AgentHarness;
  let op: Awaited<ReturnType<AgentHarness["signIn"]>>;

  beforeAll(async () => {
    h = await startAgentHarness(db);
    op = await h.signIn();
  });
  afterAll(() => h.close());

  const specsFrame = (extra: Record<string, unknown>) => ({ type: "specs", specs: SPECS, gpus: [{ ...GPU, index: 0, uuid: "GPU-0" }], ...extra });
  const detail = async (id: string) => (await h.call("GET", `/nodes/${id}`)).json.node;
  const listed = async (query: string) => (await h.call("GET", `/nodes?limit=100&${query}`)).json.nodes as Array<{ id: string; egressPolicy: string | null }>;

  it("shows what the node's agent says, everywhere a node is shown, and filters on it", async () => {
    const node = await h.connectedNode(op.token);
    // The simulated agent's first specs carry no policy, as an agent older than the policy sends them.
    expect((await detail(node.id)).egressPolicy).toBeNull();

    node.agent.send(specsFrame({ egressPolicy: "off" }));
    await eventually(async () => expect((await detail(node.id)).egressPolicy).toBe("off"));
    expect((await listed("")).find((n) => n.id === node.id)?.egressPolicy).toBe("off");
    const mine = (await h.call("GET", "/operator/nodes", { token: op.token })).json.nodes;
    expect(mine.find((n: { id: string }) => n.id === node.id).egressPolicy).toBe("off");
    expect((await listed("egressPolicy=off")).map((n) => n.id)).toContain(node.id);
    expect((await listed("egressPolicy=enforced")).map((n) => n.id)).not.toContain(node.id);

    node.agent.send(specsFrame({ egressPolicy: "enforced" }));
    await eventually(async () => expect((await detail(node.id)).egressPolicy).toBe("enforced"));
    expect((await listed("egressPolicy=enforced")).map((n) => n.id)).toContain(node.id);
  });

  it("claims nothing once its agent stops saying (replaced by one that predates the policy)", async () => {
    const node = await h.connectedNode(op.token);
    node.agent.send(specsFrame({ egressPolicy: "enforced" }));
    await eventually(async () => expect((await detail(node.id)).egressPolicy).toBe("enforced"));
    await node.agent.close();
    const { agent } = await SimAgent.connect(h.url, node.agentToken);
    await eventually(async () => expect((await detail(node.id)).egressPolicy).toBeNull());
    await agent.close();
  });
});
