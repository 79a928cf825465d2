import { randomBytes } from "node:crypto";
import { describeEachDatabase, needs } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ensureBusyboxImage, imageExists } from "../../../agent/test/support/busybox-image";
import { createLogger } from "../../src/services/logger";
import { type Registry, startRegistry } from "./support/registry";
import { type System, startSystem, until } from "./support/system";

// Private images end to end: an image pushed with a login to a real registry
// (distribution 2.8, htpasswd) and absent from the node is pulled by the real
// agent with the tenant's stored credential; a wrong password fails the
// deployment with the registry's reason; the password is never shown back nor
// written to the control plane's or the agent's log.

const USERNAME = "tenant";
const PASSWORD = `right-${randomBytes(8).toString("hex")}`;
const WRONG = `wrong-${randomBytes(8).toString("hex")}`;

needs("docker", "busybox", "registry").describe("private images end to end", () => {
  let registry: Registry;
  beforeAll(async () => {
    registry = await startRegistry({ username: USERNAME, password: PASSWORD });
  }, 60_000);
  afterAll(() => registry?.close());

  describeEachDatabase("on $name", (db) => {
    let s: System;
    let tenant: { token: string; user: { id: string } };
    let image = "";
    // Everything the control plane logged, at debug.
    const cpLines: string[] = [];

    const api = (method: string, path: string, body?: unknown) => s.h.call(method, path, { token: tenant.token, ...(body ? { body } : {}) });
    const settled = (id: string, ...statuses: string[]) =>
      until(
        statuses.join(" or "),
        async () => {
          const d = (await api("GET", `/deployments/${id}`)).json.deployment;
          return statuses.includes(d.status) && d;
        },
        90_000,
        s.explain(id, tenant.token),
      );

    beforeAll(async () => {
      image = await registry.push(ensureBusyboxImage(), `cm-test/private-busybox:${db.name}-${randomBytes(3).toString("hex")}`);
      expect(imageExists(image)).toBe(false);
      const log = createLogger("debug", "control-plane", { write: (line: string) => void cpLines.push(line) });
      s = await startSystem(db, { REGISTRY_CREDENTIALS_KEY: randomBytes(32).toString("hex") }, { log });
      // The registry is on the loopback: allowed by name, as an operator with a local registry does.
      await s.agent({ registryAllow: [registry.address] }).start();
      tenant = await s.h.signIn();
      await s.h.grantCredits(tenant.user.id, 1_000);
      await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
    }, 120_000);
    afterAll(async () => {
      await s?.close();
      if (image) await runProgram("docker", ["rmi", "-f", image]);
    }, 60_000);

    const credential = async (password: string) => {
      const r = await api("POST", "/registry-credentials", { registry: registry.address, username: USERNAME, password });
      expect(r.status, r.text).toBe(201);
      return r.json.credential.id as string;
    };
    const deploy = (registryCredentialId?: string) =>
      api("POST", "/deployments", {
        nodeId: s.nodeId,
        customImage: image,
        command: ["sleep", "600"],
        ...(registryCredentialId ? { registryCredentialId } : {}),
      });

    it("fails a deployment whose credential has a wrong password with the registry's reason", async () => {
      const r = await deploy(await credential(WRONG));
      expect(r.status, r.text).toBe(201);
      const d = await settled(r.json.deployment.id, "failed", "running");
      expect(d.status).toBe("failed");
      expect(d.statusReason).toContain(image);
      expect(d.statusReason).toMatch(/unauthorized|authentication required/);
      expect(imageExists(image)).toBe(false);
    });

    it("runs a deployment with the right credential: the agent pulls the image with it", async () => {
      const id = await credential(PASSWORD);
      const r = await deploy(id);
      expect(r.status, r.text).toBe(201);
      expect(r.json.deployment.registryCredentialId).toBe(id);
      const d = await settled(r.json.deployment.id, "running", "failed");
      expect(d.status, d.statusReason).toBe("running");
      expect(imageExists(image)).toBe(true);
      const listed = (await api("GET", "/registry-credentials")).json.credentials.find((c: { id: string }) => c.id === id);
      expect(listed.lastUsedAt).not.toBeNull();
      // Once on the node the image is used as it is, never pulled again: a deployment without a credential runs too.
      const again = await deploy();
      expect((await settled(again.json.deployment.id, "running", "failed")).status).toBe("running");
    });

    it("never shows the password back, nor writes it to the control plane's or the agent's log", async () => {
      const list = await api("GET", "/registry-credentials");
      expect(list.json.credentials.length).toBeGreaterThanOrEqual(2);
      for (const c of list.json.credentials) expect(Object.keys(c).sort()).toEqual(["createdAt", "id", "lastUsedAt", "registry", "username"]);
      const deployments = await api("GET", "/deployments");
      for (const text of [list.text, deployments.text, cpLines.join("\n"), s.agentLog()]) {
        expect(text).not.toContain(PASSWORD);
        expect(text).not.toContain(WRONG);
      }
      // The logs were written (at debug): their silence about the password is not an empty log's.
      expect(cpLines.join("\n")).toContain("agent connected");
      expect(s.agentLog()).toContain("Pulling image");
    });
  });
});
