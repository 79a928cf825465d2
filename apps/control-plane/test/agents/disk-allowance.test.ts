// A deployment's disk allowance reaches its node with the spec: its template's
// minDiskGb, and none for a custom image (the node applies its own default).
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type AgentHarness, startAgentHarness } from "./support/agent-harness";

describeEachDatabase("disk allowances sent to the agent on $name", (db) => {
  let h: AgentHarness;
  let op: Awaited<ReturnType<AgentHarness["signIn"]>>;
  let tenant: Awaited<ReturnType<AgentHarness["signIn"]>>;

  beforeAll(async () => {
    h = await startAgentHarness(db);
    op = await h.signIn();
    tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 100_000);
  });
  afterAll(() => h.close());

  it("carries the template's minDiskGb in the command, and nothing for a custom image", async () => {
    // One GPU: connectedNode then waits until the specs are stored, which template checks read.
    const node = await h.connectedNode(op.token, { gpus: 1 });
    const fromTemplate = await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId: node.id, templateId: "tpl_ubuntu" } });
    expect(fromTemplate.json.error).toBeUndefined();
    const templated = await node.agent.command(fromTemplate.json.deployment.id);
    expect(templated.deployment.diskGb).toBe(2);

    const custom = await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId: node.id, customImage: "busybox:1.36" } });
    const customCmd = await node.agent.command(custom.json.deployment.id);
    expect(customCmd.deployment).not.toHaveProperty("diskGb");
  });
});
