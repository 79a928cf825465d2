import { needs, sqliteDatabase as sqlite } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type System, startSystem, until } from "./support/system";
import { ensureWebImage } from "./support/web-image";

// What a deployment holds of its node is what Docker enforces: the CPU, memory
// and disk a tenant asked for (or was given by default) are the container's
// limits, as `docker inspect` shows them, with the real agent and engine; the
// cores of a default are the container's CPU weight, never a hard quota.

const inspect = async (id: string) => JSON.parse(await runProgram("docker", ["inspect", id]))[0];
const containerOf = async (deploymentId: string) => (await runProgram("docker", ["ps", "-q", "--filter", `label=cm.deployment-id=${deploymentId}`])).trim();

needs("docker", "busybox").describe("resource limits end to end", () => {
  let s: System;
  let token: string;
  let image: string;

  const api = (method: string, path: string, body?: unknown) => s.h.call(method, path, { token, ...(body ? { body } : {}) });
  const running = (id: string) =>
    until(
      "running",
      async () => {
        const d = (await api("GET", `/deployments/${id}`)).json.deployment;
        if (d.status === "failed") throw new Error(`failed: ${d.statusReason}`);
        return d.status === "running" && d;
      },
      undefined,
      s.explain(id, token),
    );

  beforeAll(async () => {
    image = ensureWebImage();
    s = await startSystem(sqlite);
    await s.agent().start();
    const t = await s.h.signIn();
    token = t.token;
    await s.h.grantCredits(t.user.id, 1_000);
    await until("node online", async () => {
      const n = (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node;
      return n.status === "online" && n.specs.cpuCores > 0 && n;
    });
  }, 120_000);
  afterAll(() => s?.close(), 60_000);

  it("gives the container the cpuCores, memoryMb and diskGb asked for", async () => {
    const r = await api("POST", "/deployments", { nodeId: s.nodeId, customImage: image, cpuCores: 0.5, memoryMb: 256, diskGb: 3 });
    expect(r.status).toBe(201);
    expect(r.json.deployment).toMatchObject({ gpuCount: 0, cpuCores: 0.5, memoryMb: 256, diskGb: 3 });
    await running(r.json.deployment.id);
    const c = await inspect(await containerOf(r.json.deployment.id));
    expect(c.HostConfig.NanoCpus).toBe(500_000_000);
    expect(c.HostConfig.CpuShares).toBe(512);
    expect(c.HostConfig.Memory).toBe(256 * 1024 * 1024);
    // No swap on top of the limit.
    expect(c.HostConfig.MemorySwap).toBe(256 * 1024 * 1024);
    expect(c.Config.Labels["cm.disk-gb"]).toBe("3");
    expect(c.HostConfig.DeviceRequests ?? []).toEqual([]);

    // However little: a tenant who asks for a tenth of a core gets exactly that.
    const tenth = await api("POST", "/deployments", { nodeId: s.nodeId, customImage: image, cpuCores: 0.1 });
    expect(tenth.json.deployment.cpuCores).toBe(0.1);
    await running(tenth.json.deployment.id);
    expect((await inspect(await containerOf(tenth.json.deployment.id))).HostConfig).toMatchObject({ NanoCpus: 100_000_000, CpuQuota: 0, CpuShares: 102 });
  });

  it("gives a deployment that asked for nothing the node's default share, as shown on the deployment, as its CPU weight with no quota, and refuses what the node has no room left for", async () => {
    const r = await api("POST", "/deployments", { nodeId: s.nodeId, customImage: image });
    expect(r.status).toBe(201);
    const d = r.json.deployment;
    expect(d.cpuCores).toBeGreaterThan(0);
    expect(d.memoryMb).toBeGreaterThan(0);
    await running(d.id);
    const c = await inspect(await containerOf(d.id));
    // A quota of the node's share per slot would make runc's own start run inside it (bench/README.md, deploy).
    expect(c.HostConfig).toMatchObject({ NanoCpus: 0, CpuQuota: 0, CpuShares: Math.round(d.cpuCores * 1024) });
    expect(c.HostConfig.Memory).toBe(d.memoryMb * 1024 * 1024);

    const node = (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node;
    // Held all the same: the weight changes how Docker enforces it, not what the node counts.
    expect(node.freeCpuCores).toBeCloseTo(node.specs.cpuCores - 0.5 - 0.1 - d.cpuCores, 3);
    const tooMuch = await api("POST", "/deployments", { nodeId: s.nodeId, customImage: image, cpuCores: node.specs.cpuCores });
    expect([tooMuch.status, tooMuch.json.error.code]).toEqual([409, "NODE_INSUFFICIENT_FREE_CPU"]);
  });
});
