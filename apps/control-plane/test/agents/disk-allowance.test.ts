// A deployment's disk allowance reaches its node with the spec: its template's
// minDiskGb, and none for a custom image (the node applies its own default).
// The tenant sees it on the deployment, and why the node stopped it past it.
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { overAllowance } from "../../../agent/src/disk/disk-watcher";
import { type AgentHarness, eventually, startAgentHarness } from "./support/agent-harness";
import { GPU, SPECS } from "./support/sim-agent";

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

  it("shows the tenant each deployment's allowance: the template's, else the node's default once its agent has told it", async () => {
    const node = await h.connectedNode(op.token, { gpus: 1 });
    const templated = await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId: node.id, templateId: "tpl_ubuntu" } });
    expect(templated.json.deployment.diskGb).toBe(2);
    const custom = await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId: node.id, customImage: "busybox:1.36" } });
    // The simulated agent's first specs do not tell the default, as an older agent's do not: unknown, not a guess.
    expect(custom.json.deployment.diskGb).toBeNull();

    node.agent.send({ type: "specs", specs: SPECS, gpus: [{ ...GPU, index: 0, uuid: "GPU-0" }], diskDefaultGb: 30 });
    await eventually(async () => expect((await h.getDeployment(custom.json.deployment.id, tenant.token)).diskGb).toBe(30));
    expect((await h.getDeployment(templated.json.deployment.id, tenant.token)).diskGb).toBe(2);
    const page = (await h.call("GET", "/deployments?limit=100", { token: tenant.token })).json.deployments as Array<{ id: string; diskGb: number | null }>;
    expect(page.find((d) => d.id === custom.json.deployment.id)?.diskGb).toBe(30);
    expect(page.find((d) => d.id === templated.json.deployment.id)?.diskGb).toBe(2);
  });

  it("tells the tenant, in statusReason, that the node stopped a deployment that wrote past its allowance", async () => {
    const node = await h.connectedNode(op.token, { gpus: 1 });
    const dep = await h.deploy(tenant.token, node.id, node.agent, { customImage: undefined, templateId: "tpl_ubuntu" });
    await h.run(node.agent, dep.spec, tenant.token);
    // The words the agent's disk watcher sends for a 2 GB allowance and 2.5 GB written.
    const [overrun] = overAllowance([{ containerId: "c1", deploymentId: dep.id, running: true, sizeBytes: 2_500_000_000, diskGb: 2 }], 20);
    node.agent.report(dep.spec, "failed", { reason: overrun!.reason });
    await eventually(async () => expect((await h.getDeployment(dep.id, tenant.token)).status).toBe("failed"));
    const shown = await h.getDeployment(dep.id, tenant.token);
    expect(shown.statusReason).toBe("the container wrote 2.50 GB to its disk, past its allowance of 2 GB, and was stopped");
    expect(shown.diskGb).toBe(2);
  });
});
