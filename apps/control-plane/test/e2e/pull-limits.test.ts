import { describeEachDatabase, needs } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type System, startSystem, until } from "./support/system";
import { startTrickleRegistry, type TrickleRegistry } from "./support/trickle-registry";

// A pull that never ends must not hold a node for free. A registry on the
// loopback sends its one layer a byte every 2 s, as the hostile registry did:
// the real agent's Docker pulls from it. Past AGENT_PULL_STALL_S (3 s here) the
// deployment fails saying why and what it held is free again for another
// tenant; a stop or a delete during a pull ends it at once, and the node's
// Docker stops downloading (the registry sees its connection close).

needs("docker").describe("a pull that never ends", () => {
  let registry: TrickleRegistry;
  beforeAll(async () => {
    registry = await startTrickleRegistry();
  });
  afterAll(() => registry?.close());

  describeEachDatabase("on $name", (db) => {
    let s: System;
    let tenant: { token: string; user: { id: string } };
    let other: { token: string; user: { id: string } };
    let cores = 0;
    const images: string[] = [];

    const api = (who: { token: string }, method: string, path: string, body?: unknown) =>
      s.h.call(method, path, { token: who.token, ...(body ? { body } : {}) });
    const status = async (id: string) => (await api(tenant, "GET", `/deployments/${id}`)).json.deployment;
    /** A deployment of the trickling image holding `cpuCores` of the node (every core by default). */
    const deploySlow = async (cpuCores = cores) => {
      const image = `${registry.address}/cm-test/slow:${db.name}-${images.length}`;
      images.push(image);
      const r = await api(tenant, "POST", "/deployments", { nodeId: s.nodeId, customImage: image, cpuCores, memoryMb: 256 });
      expect(r.status, r.text).toBe(201);
      const id = r.json.deployment.id as string;
      await until(
        "the layer downloading",
        async () => registry.downloads.length >= images.length && (await status(id)).status === "pulling",
        60_000,
        s.explain(id, tenant.token),
      );
      return id;
    };

    beforeAll(async () => {
      s = await startSystem(db);
      await s.agent({ pullStallS: 3, registryAllow: [registry.address] }).start();
      tenant = await s.h.signIn();
      other = await s.h.signIn();
      await s.h.grantCredits(tenant.user.id, 1_000);
      await s.h.grantCredits(other.user.id, 1_000);
      cores = await until("node online", async () => {
        const n = (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node;
        return n.status === "online" && n.specs.cpuCores > 0 && n.specs.cpuCores;
      });
    }, 120_000);
    afterAll(async () => {
      await s?.close();
      for (const image of images) await runProgram("docker", ["rmi", "-f", image]);
    }, 60_000);

    it("fails a pull that makes no progress, says why, frees what it held and stops Docker's download", async () => {
      const id = await deploySlow();
      const blocked = await api(other, "POST", "/deployments", { nodeId: s.nodeId, customImage: "cm-none:1", cpuCores: 1, memoryMb: 64 });
      expect(blocked.json.error?.code).toBe("NODE_INSUFFICIENT_FREE_CPU");

      const failed = await until("failed", async () => ((await status(id)).status === "failed" ? status(id) : undefined), 30_000, s.explain(id, tenant.token));
      expect(failed.statusReason).toBe(
        `the pull of image "${images[0]}" made no progress for 3 s (the node's limit, AGENT_PULL_STALL_S): the registry stopped sending; the deployment holds nothing now`,
      );
      await until("the node's Docker stops downloading", async () => registry.downloads.every((d) => !d.open), 10_000);
      const fits = await api(other, "POST", "/deployments", { nodeId: s.nodeId, customImage: "cm-none:1", cpuCores: 1, memoryMb: 64 });
      expect(fits.status, fits.text).toBe(201);
      const fitsId = fits.json.deployment.id as string;
      expect((await api(other, "DELETE", `/deployments/${fitsId}`)).status).toBe(200);
      // Its core is the node's again once the delete is carried out, before the next test wants every core.
      await until(
        "the other tenant's deployment ended",
        async () => ["stopped", "exited", "failed"].includes((await s.h.deps.repos.deployments.getOnNode(fitsId, s.nodeId))?.status ?? ""),
        30_000,
      );
    }, 120_000);

    it("a stop or a delete during a pull ends it at once, and Docker's download with it", async () => {
      await s.stopAgents();
      await s.agent({ pullStallS: 600, registryAllow: [registry.address] }).start();
      for (const end of ["stop", "delete"] as const) {
        // Half a core: what is measured here is the pull's end, not the node's room.
        const id = await deploySlow(0.5);
        const download = registry.downloads.at(-1)!;
        const at = Date.now();
        const r = end === "stop" ? await api(tenant, "POST", `/deployments/${id}/stop`) : await api(tenant, "DELETE", `/deployments/${id}`);
        expect(r.status, r.text).toBeLessThan(300);
        await until("the download closed", async () => !download.open, 10_000);
        if (end === "stop") await until("stopped", async () => (await status(id)).status === "stopped", 10_000, s.explain(id, tenant.token));
        // Seconds, not the pull's length: the registry would have taken 97 days to send the layer.
        expect(Date.now() - at).toBeLessThan(10_000);
      }
    }, 180_000);
  });
});
