// The operator's path with real processes: the real control plane, a real agent
// driving real Docker, and the doctor run as an operator runs it (a process of
// its own, as `npm run agent -- doctor` starts it). Checking a token must leave
// the running agent connected and a node without an agent offline; retiring a
// node must leave nothing of it running on the machine.
import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { needs, sqliteDatabase as sqlite } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { ConnectionFailure } from "../../../agent/src/connection/connection";
import { ensureScriptImage } from "../../../agent/test/support/script-image";
import { type System, startSystem, until } from "./support/system";

const ROOT = resolve(import.meta.dirname, "../../../..");
/** Writes a line a second; on SIGTERM a last line, then exits: what a retired node's agent must still ship. */
const TICKER = 'trap "echo last words; exit 0" TERM; i=1; while true; do echo "tick $i"; i=$((i+1)); usleep 200000; done';

/** `npm run agent -- doctor --control-plane URL --token TOKEN`, as the README has the operator run it. */
function doctor(url: string, token: string): Promise<{ code: number; stdout: string }> {
  return new Promise((done) => {
    execFile(
      resolve(ROOT, "node_modules/.bin/tsx"),
      [resolve(ROOT, "apps/agent/src/index.ts"), "doctor", "--control-plane", url, "--token", token],
      { cwd: ROOT, timeout: 60_000 },
      (err, stdout) => done({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout }),
    );
  });
}

const docker = async (...args: string[]) => (await runProgram("docker", args)).split("\n").filter(Boolean);

needs("docker", "busybox").describe("the operator's path with a real agent and the real control plane", () => {
  let s: System;
  let image = "";
  let tenant = "";
  let operatorToken = "";
  const failures: ConnectionFailure[] = [];
  let agent: ReturnType<System["agent"]>;

  beforeAll(async () => {
    image = ensureScriptImage();
    s = await startSystem(sqlite);
    agent = s.agent();
    agent.onFailure((failure) => failures.push(failure));
    await agent.start();
    const t = await s.h.signIn();
    tenant = t.token;
    await s.h.grantCredits(t.user.id, 1_000);
    operatorToken = (await s.h.signIn()).token;
    await until("the node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online", 30_000);
  }, 120_000);
  afterAll(() => s?.close(), 60_000);

  let deploymentId = "";

  it("doctor checks the running agent's token without unplugging it: the node still takes a deployment", async () => {
    const checked = await doctor(s.h.url, s.agentToken);
    expect(checked.stdout).toContain(`✓ Token: accepted: this machine is node ${s.nodeId}`);
    const r = await s.h.call("POST", "/deployments", { token: tenant, body: { nodeId: s.nodeId, customImage: image, env: { SCRIPT: TICKER } } });
    expect(r.status).toBe(201);
    deploymentId = r.json.deployment.id;
    await until(
      "the deployment running",
      async () => (await s.h.call("GET", `/deployments/${deploymentId}`, { token: tenant })).json.deployment.status === "running",
      60_000,
      s.explain(deploymentId, tenant),
    );
    expect(failures).toEqual([]);
    expect(agent.state).toBe("ready");
  }, 120_000);

  it("doctor does not make a node without an agent look online", async () => {
    const r = await s.h.call("POST", "/operator/nodes", {
      token: operatorToken,
      body: { name: "idle", region: "eu-west", country: "DE", hourlyRateCents: 10, maxDeployments: 1 },
    });
    const checked = await doctor(s.h.url, r.json.agentToken);
    expect(checked.stdout).toContain(`✓ Token: accepted: this machine is node ${r.json.node.id}`);
    expect((await s.h.call("GET", `/nodes/${r.json.node.id}`)).json.node.status).toBe("offline");
    const refused = await s.h.call("POST", "/deployments", { token: tenant, body: { nodeId: r.json.node.id, customImage: image } });
    expect(refused.json.error.code).toBe("NODE_OFFLINE");
  }, 90_000);

  it("retiring the node drains it: the agent ships the last lines, removes its containers and sandboxes, and stops", async () => {
    expect(deploymentId).not.toBe("");
    const node = `cm.node-id=${s.nodeId}`;
    const run = `${Object.keys(s.runLabel)[0]}=${Object.values(s.runLabel)[0]}`;
    expect((await docker("ps", "-q", "--filter", `label=${node}`, "--filter", `label=${run}`)).length).toBeGreaterThan(0);
    expect((await s.h.call("DELETE", `/operator/nodes/${s.nodeId}`, { token: s.operatorToken })).status).toBe(200);
    await until(
      "the agent to say the node was retired",
      async () => s.agentLog().includes(`Node ${s.nodeId} was retired by its operator`),
      60_000,
      async () => s.agentLog(),
    );
    // Its tenant's container and sandbox, and the spare sandboxes with their networks.
    expect(await docker("ps", "-aq", "--filter", `label=${node}`, "--filter", `label=${run}`)).toEqual([]);
    expect(await docker("network", "ls", "-q", "--filter", `label=${node}`, "--filter", `label=${run}`)).toEqual([]);
    const lines = (await s.h.deps.repos.logs.tail(deploymentId, 10_000)).map((l) => l.message);
    expect(lines).toContain("last words");
    expect(s.agentLog()).toMatch(new RegExp(`Node ${s.nodeId} was retired by its operator: its 1 container\\(s\\) and its network sandboxes were removed`));
    expect(failures).toEqual([]);
    expect(agent.state).not.toBe("ready");
  }, 150_000);
});
