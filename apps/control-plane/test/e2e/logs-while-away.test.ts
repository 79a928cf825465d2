// Lines a container writes while its agent is away reach the real control plane's
// store even when the tenant stopped or deleted the deployment meanwhile: the
// returning agent ships them to the end before it stops or removes the container,
// and the control plane takes logs of a stopped or deleted deployment until its
// agent reports it gone.
import { needs, sqliteDatabase as sqlite } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ensureScriptImage } from "../../../agent/test/support/script-image";
import { type System, startSystem, until } from "./support/system";

const COUNTER = 'trap "exit 0" TERM; i=1; while true; do echo "line $i"; i=$((i+1)); usleep 2000; done';

const containerOf = async (deploymentId: string) => (await runProgram("docker", ["ps", "-aq", "--filter", `label=cm.deployment-id=${deploymentId}`])).trim();
const dockerLineCount = async (id: string) => (await runProgram("docker", ["logs", id])).split("\n").filter(Boolean).length;
const isRunning = async (id: string) => (await runProgram("docker", ["inspect", "-f", "{{.State.Running}}", id])).trim() === "true";

needs("docker", "busybox").describe("lines written while the agent is away, with the real control plane", () => {
  let s: System;
  let token = "";
  let image = "";

  beforeAll(async () => {
    image = ensureScriptImage();
    s = await startSystem(sqlite);
    await s.agent().start();
    // Online once its agent has reported its specs (its first host probe can take a second).
    await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
    const tenant = await s.h.signIn();
    token = tenant.token;
    await s.h.grantCredits(tenant.user.id, 1_000);
  }, 120_000);
  afterAll(() => s?.close(), 60_000);

  /** The stored lines, oldest first, checked to be "line 1" .. "line n" with none missing or twice. */
  async function storedLines(deploymentId: string): Promise<number> {
    const rows = await s.h.deps.repos.logs.tail(deploymentId, 10_000);
    const broken = rows.findIndex((row, i) => row.message !== `line ${i + 1}`);
    expect(broken, `stored line ${broken}: ${JSON.stringify(rows[broken])}`).toBe(-1);
    return rows.length;
  }

  /** While the agent is away the container writes on (slowly on a busy machine): 200 lines more. */
  async function writtenAlone(id: string, atDeath: number): Promise<void> {
    await until("200 lines written while the agent is away", async () => (await dockerLineCount(await containerOf(id))) >= atDeath + 200, 30_000);
  }

  async function runningCounter(): Promise<string> {
    const r = await s.h.call("POST", "/deployments", { token, body: { nodeId: s.nodeId, customImage: image, env: { SCRIPT: COUNTER } } });
    expect(r.status).toBe(201);
    const id = r.json.deployment.id as string;
    await until("running and logging", async () => (await s.h.deps.repos.logs.tail(id, 10_000)).length >= 100, 30_000, s.explain(id, token));
    return id;
  }

  it("stopped while the agent is away: every line is stored when the returning agent stops the container", async () => {
    const id = await runningCounter();
    await s.stopAgents();
    const atDeath = await storedLines(id);
    await writtenAlone(id, atDeath);
    expect((await s.h.call("POST", `/deployments/${id}/stop`, { token })).status).toBe(200);
    const back = Date.now();
    await s.agent().start();
    // Without its agent the control plane shows it stopped at once; the container stops when the agent is back.
    await until("the container stopped", async () => !(await isRunning(await containerOf(id))), 30_000, s.explain(id, token));
    const written = await dockerLineCount(await containerOf(id));
    await until("every line stored", async () => (await s.h.deps.repos.logs.tail(id, 10_000)).length >= written, 20_000, s.explain(id, token)).catch(
      () => undefined,
    );
    const stored = await storedLines(id);
    console.log(
      `real control plane, stopped while away: ${atDeath} stored at the agent's stop, ${written} written, ${stored} stored, ${Date.now() - back} ms after the agent came back`,
    );
    expect(written).toBeGreaterThan(atDeath + 100);
    expect(stored).toBe(written);
  }, 90_000);

  it("deleted while the agent is away: every line is stored before the container is removed", async () => {
    const id = await runningCounter();
    await s.stopAgents();
    const atDeath = await storedLines(id);
    await writtenAlone(id, atDeath);
    expect((await s.h.call("DELETE", `/deployments/${id}`, { token })).status).toBe(200);
    const container = await containerOf(id);
    const writtenBefore = await dockerLineCount(container);
    await s.agent().start();
    // Reported removed: the container, its sandbox and network are gone (cleanup must not race their removal).
    await until(
      "removed from the node",
      async () => (await s.h.deps.repos.deployments.getOnNode(id, s.nodeId))?.removedFromNodeAt != null,
      30_000,
      s.explain(id, token),
    );
    expect(await containerOf(id)).toBe("");
    const stored = await storedLines(id);
    console.log(`real control plane, deleted while away: ${atDeath} stored at the agent's stop, at least ${writtenBefore} written, ${stored} stored`);
    expect(writtenBefore).toBeGreaterThan(atDeath + 100);
    expect(stored).toBeGreaterThanOrEqual(writtenBefore);
  }, 90_000);
});
