import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { describeEachDatabase, needs } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type System, startSystem, until } from "./support/system";
import { startTrickleRegistry, type TrickleRegistry } from "./support/trickle-registry";

// The node's Docker pulls as root on the host, outside the egress policy: an
// image named after a loopback service, or a registry whose token challenge
// names one (on a cloud host, the metadata service), must fail before Docker
// connects there, and nothing that service would answer reaches the tenant.
// A registry the operator allows by name is pulled from as before.

needs("docker").describe("where the node's Docker may pull from", () => {
  /** A loopback service standing in for the node's own (its admin page, a cloud's metadata): counts what reaches it. */
  let inner: Server;
  let innerAddress = "";
  const reached: string[] = [];
  let challenging: TrickleRegistry;
  let allowed: TrickleRegistry;

  beforeAll(async () => {
    inner = createServer((req, res) => {
      reached.push(req.url ?? "");
      res.writeHead(404, { "content-type": "application/json" }).end('{"secret":"the node\'s credentials"}');
    });
    await new Promise<void>((resolve) => inner.listen(0, "127.0.0.1", resolve));
    innerAddress = `127.0.0.1:${(inner.address() as AddressInfo).port}`;
    challenging = await startTrickleRegistry({ realm: `http://${innerAddress}/latest/meta-data/iam/security-credentials/` });
    allowed = await startTrickleRegistry({ byteEveryMs: 1 });
  });
  afterAll(async () => {
    await challenging?.close();
    await allowed?.close();
    inner?.close();
  });

  describeEachDatabase("on $name", (db) => {
    let s: System;
    let tenant: { token: string; user: { id: string } };
    const api = (method: string, path: string, body?: unknown) => s.h.call(method, path, { token: tenant.token, ...(body ? { body } : {}) });
    const deploy = async (image: string) => {
      const r = await api("POST", "/deployments", { nodeId: s.nodeId, customImage: image, cpuCores: 0.5, memoryMb: 128 });
      expect(r.status, r.text).toBe(201);
      const id = r.json.deployment.id as string;
      return until(
        "an end to the pull",
        async () => {
          const d = (await api("GET", `/deployments/${id}`)).json.deployment;
          return ["failed", "running", "starting"].includes(d.status) && d;
        },
        60_000,
        s.explain(id, tenant.token),
      );
    };

    beforeAll(async () => {
      s = await startSystem(db);
      // The challenging registry is allowed by name; the service its challenge names is not.
      await s.agent({ registryAllow: [challenging.address, allowed.address] }).start();
      tenant = await s.h.signIn();
      await s.h.grantCredits(tenant.user.id, 1_000);
      await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
    }, 120_000);
    afterAll(() => s?.close(), 60_000);

    it("refuses an image on a loopback address before Docker connects to it", async () => {
      const d = await deploy(`${innerAddress}/tenant/app:1`);
      expect(d.status).toBe("failed");
      expect(d.statusReason).toContain(
        `the image's registry ${innerAddress} is on a loopback, private or link-local address, or the node's own, which tenants' images may not be pulled from`,
      );
      expect(d.statusReason).not.toContain("secret");
      // localhost and the control plane's own port are the same loopback.
      const cp = await deploy(`localhost:${new URL(s.h.url).port}/tenant/app:1`);
      expect(cp.statusReason).toContain("is on a loopback, private or link-local address");
      expect(reached).toEqual([]);
    }, 120_000);

    it("refuses a registry whose token service is on a loopback address, and never fetches the token", async () => {
      const d = await deploy(`${challenging.address}/tenant/app:1`);
      expect(d.status).toBe("failed");
      // The service's address is the node's business: the tenant reads that it is a local one.
      expect(d.statusReason).toContain(`the token service (address hidden) that the registry ${challenging.address} names is on a loopback`);
      expect(reached).toEqual([]);
      // The guard asked for the challenge; Docker never came for the manifest.
      expect(challenging.requests.every((path) => path === "/v2/")).toBe(true);
    }, 120_000);

    it("pulls from a registry on the loopback that the operator allows by name", async () => {
      const before = allowed.requests.length;
      const r = await api("POST", "/deployments", { nodeId: s.nodeId, customImage: `${allowed.address}/tenant/app:${db.name}`, cpuCores: 0.5, memoryMb: 128 });
      const id = r.json.deployment.id as string;
      await until(
        "Docker downloading from it",
        async () => allowed.downloads.length > 0 && allowed.requests.length > before,
        60_000,
        s.explain(id, tenant.token),
      );
      expect((await api("GET", `/deployments/${id}`)).json.deployment.status).toBe("pulling");
      expect((await api("DELETE", `/deployments/${id}`)).status).toBeLessThan(300);
    }, 120_000);
  });
});
