import { sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type AgentHarness, startAgentHarness } from "../../control-plane/test/agents/support/agent-harness";
import type { SimAgent } from "../../control-plane/test/agents/support/sim-agent";
import { terminal } from "./support/cli";
import { enrolNodeFromCli } from "./support/operator-node";

// `cm operator set`, `maintenance` and `deployments` against a real control plane: the
// operator enrols a node from the CLI and a simulated agent runs a tenant's deployment on it.
let h: AgentHarness;
let op: ReturnType<typeof terminal>;
let nodeId: string;
let agent: SimAgent;
let tenant: Awaited<ReturnType<AgentHarness["signIn"]>>;
let running: string;

beforeAll(async () => {
  h = await startAgentHarness(sqliteDatabase);
  op = terminal({ CM_API_URL: h.url });
  op.keypair();
  ({ nodeId, agent } = await enrolNodeFromCli(h, op, { name: "box", rate: 60, max: 4 }));
  tenant = await h.signIn();
  await h.grantCredits(tenant.user.id, 100);
  const d = await h.deploy(tenant.token, nodeId, agent, { env: { TOKEN: "tenant-secret-value" } });
  await h.run(agent, d.spec, tenant.token);
  running = d.id;
  h.clock.advance(600_000);
  await h.beat(agent, nodeId);
  await h.deps.metering.tick();
}, 60_000);
afterAll(async () => {
  await agent?.close();
  op?.close();
  await h?.close();
});

it("set changes the rate for new deployments only, and says so; without a flag it is a usage error", async () => {
  const r = await op.cm(["operator", "set", nodeId, "--rate", "90", "--name", "box-2", "--max-deployments", "3", "--country", "fr"]);
  expect(r.code, r.stderr).toBe(0);
  expect(r.stdout).toMatch(/^name:\s+box-2$/m);
  expect(r.stdout).toMatch(/^rate:\s+90¢\/h$/m);
  expect(r.stdout).toMatch(/^region:\s+eu-west \(FR\)$/m);
  expect(r.stderr).toContain("running ones keep theirs");
  expect((await h.getDeployment(running, tenant.token)).hourlyRateCents).toBe(60);
  const none = await op.cm(["operator", "set", nodeId]);
  expect(none.code).toBe(2);
  expect(none.stderr).toContain("--max-deployments");
  const bad = await op.cm(["operator", "set", nodeId, "--region", "mars"]);
  expect(bad.code).toBe(1);
  expect(bad.stderr).toMatch(/VALIDATION_ERROR.*region/);
});

it("maintenance on shows the reason to tenants and refuses new deployments; off takes deployments again", async () => {
  const on = await op.cm(["operator", "maintenance", nodeId, "on", "--reason", "new fans"]);
  expect(on.code, on.stderr).toBe(0);
  expect(on.stdout).toMatch(/^status:\s+maintenance$/m);
  expect(on.stdout).toMatch(/^maintenance:\s+new fans$/m);
  const shown = await op.cm(["nodes", "show", nodeId]);
  expect(shown.stdout).toMatch(/^maintenance:\s+new fans \(since .*; no new deployments\)$/m);
  expect((await op.cm(["operator", "nodes"])).stdout).toContain("maintenance: new fans");
  const refused = await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId, customImage: "busybox" } });
  expect(refused.json.error).toMatchObject({ code: "NODE_IN_MAINTENANCE", message: expect.stringContaining("new fans") });
  expect((await h.getDeployment(running, tenant.token)).status).toBe("running");
  const off = await op.cm(["operator", "maintenance", nodeId, "off"]);
  expect(off.code, off.stderr).toBe(0);
  expect(off.stdout).toMatch(/^status:\s+online$/m);
  expect((await op.cm(["operator", "maintenance", nodeId, "maybe"])).code).toBe(2);
});

it("deployments lists what is on the node with its rate and earnings, never the tenant's env", async () => {
  const r = await op.cm(["operator", "deployments", nodeId]);
  expect(r.code, r.stderr).toBe(0);
  // 10 minutes at 60 credits/h is 10 credits, 9 of them earned after the 10% fee.
  expect(r.stdout).toContain(`${running}\trunning\tbusybox:1.36\t-\t0\t60¢/h\t9\t`);
  expect(r.stdout).not.toContain("tenant-secret-value");
  const json = JSON.parse((await op.cm(["operator", "deployments", nodeId, "--json"])).stdout);
  expect(json.deployments[0]).toMatchObject({ id: running, earned: 9, hourlyRateCents: 60 });
  expect(JSON.stringify(json)).not.toContain("tenant-secret-value");
  expect((await op.cm(["operator", "deployments", "node_nope"])).stderr).toContain("NODE_NOT_FOUND");
});
