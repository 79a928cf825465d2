import { sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type AgentHarness, startAgentHarness } from "../../control-plane/test/agents/support/agent-harness";
import type { SimAgent } from "../../control-plane/test/agents/support/sim-agent";
import { terminal } from "./support/cli";
import { enrolNodeFromCli } from "./support/operator-node";

// `cm operator earnings` against a real control plane: the operator enrols a node from the
// CLI, a simulated agent runs a tenant's deployment on it for ten metered minutes.
let h: AgentHarness;
let op: ReturnType<typeof terminal>;
let nodeId: string;
let agent: SimAgent;

beforeAll(async () => {
  h = await startAgentHarness(sqliteDatabase);
  op = terminal({ CM_API_URL: h.url });
  op.keypair();
  ({ nodeId, agent } = await enrolNodeFromCli(h, op, { name: "earner", rate: 60, max: 2 }));
  const t = await h.signIn();
  await h.grantCredits(t.user.id, 100);
  const d = await h.deploy(t.token, nodeId, agent);
  await h.run(agent, d.spec, t.token);
  await h.meterMinutes(agent, nodeId, 10);
}, 60_000);
afterAll(async () => {
  await agent?.close();
  op?.close();
  await h?.close();
});

it("shows pending, available, paying out and paid out, and the per-node and per-day tables (10 credits of usage: 9 earned, 1 fee)", async () => {
  const r = await op.cm(["operator", "earnings"]);
  expect(r.code, r.stderr).toBe(0);
  expect(r.stdout).toMatch(/^pending:\s+9 credits/m);
  expect(r.stdout).toMatch(/^available:\s+0 credits/m);
  expect(r.stdout).toMatch(/^paying out:\s+0 credits/m);
  expect(r.stdout).toMatch(/^paid out:\s+0 credits/m);
  expect(r.stdout).toContain(`${nodeId}\t10\t1\t0\t9`);
  expect(r.stdout).toContain(`${new Date(h.clock.now()).toISOString().slice(0, 10)}\t10\t1\t0\t9`);
  const json = JSON.parse((await op.cm(["operator", "earnings", "--json", "--days", "7"])).stdout);
  expect(json.earnings).toMatchObject({ pending: 9, available: 0, payingOut: 0, paidOut: 0, feePercent: 10, holdHours: 24 });
});

it("lists the earnings rows a page at a time with --transactions", async () => {
  const r = await op.cm(["operator", "earnings", "--transactions", "--limit", "3"]);
  expect(r.code, r.stderr).toBe(0);
  expect(r.stdout.trim().split("\n")).toHaveLength(3);
  expect(r.stdout).toMatch(new RegExp(`\tusage\t\\+0\\.90\t${nodeId}\tdep_`));
  expect(r.stderr).toContain("page 1 of 4 (10 rows)");
  const bad = await op.cm(["operator", "earnings", "--days", "400"]);
  expect(bad.code).not.toBe(0);
  expect(bad.stderr).toMatch(/days/);
});
