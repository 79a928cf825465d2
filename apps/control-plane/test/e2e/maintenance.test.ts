import { needs, sqliteDatabase as sqlite } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ensureBusyboxImage } from "../../../agent/test/support/busybox-image";
import { type System, startSystem, until } from "./support/system";

// Maintenance with the real agent and Docker (issue 28): the operator pauses the node while
// a tenant's container runs; the container runs on, through the agent's heartbeats and a
// restart of the agent, none of which takes the node out of maintenance.

const containerOf = async (deploymentId: string) => (await runProgram("docker", ["ps", "-q", "--filter", `label=cm.deployment-id=${deploymentId}`])).trim();

needs("docker", "busybox").describe("maintenance with the real agent", () => {
  let s: System;
  let tenant: { token: string };
  let image = "";

  beforeAll(async () => {
    image = ensureBusyboxImage();
    s = await startSystem(sqlite);
    await s.agent().start();
    tenant = await s.h.signIn();
    await s.h.grantCredits((await s.h.call("GET", "/auth/me", { token: tenant.token })).json.user.id, 1_000);
    await until("node online with its specs", async () => {
      const n = (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node;
      return n.status === "online" && n.specs.cpuCores > 0;
    });
  }, 120_000);
  afterAll(() => s?.close(), 60_000);

  const node = async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node;
  const deployment = async (id: string) => (await s.h.call("GET", `/deployments/${id}`, { token: tenant.token })).json.deployment;
  const create = () =>
    s.h.call("POST", "/deployments", {
      token: tenant.token,
      body: { nodeId: s.nodeId, customImage: image, command: ["sleep", "3600"], cpuCores: 0.1, memoryMb: 64 },
    });

  it("keeps the running container running, through heartbeats and an agent restart, and refuses new deployments until it ends", async () => {
    const made = await create();
    expect(made.status, made.text).toBe(201);
    const id = made.json.deployment.id as string;
    await until("running", async () => (await deployment(id)).status === "running", 60_000, s.explain(id, tenant.token));
    const container = await containerOf(id);
    expect(container).not.toBe("");

    const on = await s.h.call("POST", `/operator/nodes/${s.nodeId}/maintenance`, {
      token: s.operatorToken,
      body: { enabled: true, reason: "swapping a disk" },
    });
    expect(on.json.node).toMatchObject({ status: "maintenance", maintenanceReason: "swapping a disk" });

    // Heartbeats go on being written for a whole interval (5 s): the node stays in maintenance.
    const since = Date.parse((await node()).lastHeartbeat);
    await until("heartbeats an interval later", async () => Date.parse((await node()).lastHeartbeat) >= since + 5_000, 30_000);
    expect(await node()).toMatchObject({ status: "maintenance", maintenanceReason: "swapping a disk" });
    const refused = await create();
    expect(refused.status).toBe(409);
    expect(refused.json.error).toMatchObject({ code: "NODE_IN_MAINTENANCE", message: expect.stringContaining("swapping a disk") });

    // The agent restarts: its hello and specs leave the node in maintenance, and it adopts the container.
    await s.stopAgents();
    await s.agent().start();
    const back = Date.now();
    await until("the agent's heartbeat after its restart", async () => Date.parse((await node()).lastHeartbeat) > back, 30_000);
    expect(await node()).toMatchObject({ status: "maintenance", maintenanceReason: "swapping a disk" });
    expect(await containerOf(id)).toBe(container);
    await until("billed", async () => (await deployment(id)).totalCost > 0, 30_000);
    expect((await deployment(id)).status).toBe("running");
    // Its heartbeats counted as uptime meanwhile.
    expect((await node()).uptime.last24h).toBeGreaterThan(0);

    const off = await s.h.call("POST", `/operator/nodes/${s.nodeId}/maintenance`, { token: s.operatorToken, body: { enabled: false } });
    expect(off.json.node).toMatchObject({ status: "online", maintenanceReason: null });
    const after = await create();
    expect(after.status, after.text).toBe(201);
    await until("the new one running", async () => (await deployment(after.json.deployment.id)).status === "running", 60_000);
    expect(await containerOf(id)).toBe(container);
  }, 180_000);
});
