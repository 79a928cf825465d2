import { randomBytes } from "node:crypto";
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type AgentHarness, eventually, startAgentHarness } from "./support/agent-harness";
import { SimAgent } from "./support/sim-agent";

// Which frames carry a tenant's registry login to the agent: the command that
// creates or starts the deployment, and the sync replaying it while it has not
// started; never a deployment that runs, a stop, nor another node's sync.

const PASSWORD = "pull-secret-of-the-tenant";

describeEachDatabase("registry logins on the agent wire on $name", (db) => {
  let h: AgentHarness;
  let op: Awaited<ReturnType<AgentHarness["signIn"]>>;
  let tenant: Awaited<ReturnType<AgentHarness["signIn"]>>;
  let credentialId = "";

  beforeAll(async () => {
    h = await startAgentHarness(db, { REGISTRY_CREDENTIALS_KEY: randomBytes(32).toString("base64") });
    op = await h.signIn();
    tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 100_000);
    const r = await h.call("POST", "/registry-credentials", { token: tenant.token, body: { registry: "ghcr.io", username: "octo", password: PASSWORD } });
    credentialId = r.json.credential.id;
  });
  afterAll(() => h.close());

  it("sends the login in the create command and the sync that replays it, and not once the deployment runs", async () => {
    const node = await h.connectedNode(op.token);
    const { id, cmd, spec } = await h.deploy(tenant.token, node.id, node.agent, { customImage: "ghcr.io/acme/private:1", registryCredentialId: credentialId });
    expect(cmd.deployment.registryAuth).toEqual({ serveraddress: "ghcr.io", username: "octo", password: PASSWORD });
    await node.agent.close();

    // The agent came back before it started the container: the sync carries the login again.
    const back = await SimAgent.connect(h.url, node.agentToken);
    expect(back.sync.deployments.find((d) => d.deploymentId === id)?.registryAuth?.password).toBe(PASSWORD);
    await h.run(back.agent, spec, tenant.token);
    await back.agent.close();

    // Running: a reconnect's sync says what to keep running, without the login.
    const again = await SimAgent.connect(h.url, node.agentToken);
    const synced = again.sync.deployments.find((d) => d.deploymentId === id)!;
    expect(synced.desiredState).toBe("running");
    expect(synced.registryAuth).toBeUndefined();
    await h.call("POST", `/deployments/${id}/stop`, { token: tenant.token });
    const stop = await again.agent.command(id, "stop");
    expect(stop.deployment.registryAuth).toBeUndefined();
    again.agent.report(stop.deployment, "stopped");
    await eventually(async () => expect((await h.getDeployment(id, tenant.token)).status).toBe("stopped"));

    // A start by the tenant may need the image again: its command carries the login.
    await h.call("POST", `/deployments/${id}/start`, { token: tenant.token });
    const start = await again.agent.command(id, "start");
    expect(start.deployment.registryAuth?.password).toBe(PASSWORD);
    await again.agent.close();
    const listed = (await h.call("GET", "/registry-credentials", { token: tenant.token })).json.credentials[0];
    expect(listed.lastUsedAt).not.toBeNull();
  });

  it("pulls anonymously (no login in the command) once the credential was deleted", async () => {
    const node = await h.connectedNode(op.token);
    const extra = await h.call("POST", "/registry-credentials", { token: tenant.token, body: { registry: "ghcr.io", username: "octo", password: PASSWORD } });
    const r = await h.call("POST", "/deployments", {
      token: tenant.token,
      body: { nodeId: node.id, customImage: "ghcr.io/acme/private:1", registryCredentialId: extra.json.credential.id },
    });
    await node.agent.command(r.json.deployment.id, "create");
    await h.call("DELETE", `/registry-credentials/${extra.json.credential.id}`, { token: tenant.token });
    await node.agent.close();
    const back = await SimAgent.connect(h.url, node.agentToken);
    const synced = back.sync.deployments.find((d) => d.deploymentId === r.json.deployment.id)!;
    expect(synced.desiredState).toBe("running");
    expect(synced.registryAuth).toBeUndefined();
    await back.agent.close();
  });
});
