import { ARGV_MAX_ITEMS, ARGV_MAX_TOTAL_BYTES } from "@cm/protocol";
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { costMicro } from "../../src/services/charges";
import { type AgentHarness, eventually, startAgentHarness } from "./support/agent-harness";
import { SimAgent } from "./support/sim-agent";

// A deployment's command and restart policy through the API, the database and
// the agent's spec; restarts as an agent reports the exits, and what they cost.

const S = 1000;

describeEachDatabase("command and restart policy on $name", (db) => {
  let h: AgentHarness;
  let op: Awaited<ReturnType<AgentHarness["signIn"]>>;

  beforeAll(async () => {
    h = await startAgentHarness(db);
    op = await h.signIn();
  });
  afterAll(() => h.close());

  async function tenantWith(credits: number) {
    const t = await h.signIn();
    await h.grantCredits(t.user.id, credits);
    return t;
  }
  const row = async (id: string) => (await h.deps.repos.deployments.get(id))!;

  it("stores the command and entrypoint, shows them, and sends them in the agent's spec", async () => {
    const t = await tenantWith(100);
    const node = await h.connectedNode(op.token);
    const command = ["python", "-c", "print('é \u{1F600}')", ""];
    const { id, spec } = await h.deploy(t.token, node.id, node.agent, { command, entrypoint: [""], restart: "on-failure" });
    expect(spec).toMatchObject({ command, entrypoint: [""] });
    expect(await h.getDeployment(id, t.token)).toMatchObject({ command, entrypoint: [""], restart: "on-failure", maxRestarts: 3, restartCount: 0 });

    // A stop command carries neither: it makes nothing from the spec.
    await h.call("POST", `/deployments/${id}/stop`, { token: t.token });
    const stop = await node.agent.command(id, "stop");
    expect(stop.deployment).not.toHaveProperty("command");
    expect(stop.deployment).not.toHaveProperty("entrypoint");
    await node.agent.close();
  });

  it.each([
    ["an empty command", { command: [] }, "command", /at least 1|>=1/],
    ["a NUL in an argument", { command: ["a\0b"] }, "command.0", /NUL/],
    ["too many arguments", { command: Array(ARGV_MAX_ITEMS + 1).fill("x") }, "command", /256/],
    ["a too long argument", { command: ["x".repeat(4097)] }, "command.0", /4096/],
    ["a command over its bytes", { command: Array(16).fill("x".repeat(ARGV_MAX_TOTAL_BYTES / 16)) }, "command", /32 KiB in all/],
    ["an entrypoint string", { entrypoint: "sh" }, "entrypoint", /array/],
    ["restart always", { restart: "always" }, "restart", /no|on-failure/],
    ["maxRestarts 11", { restart: "on-failure", maxRestarts: 11 }, "maxRestarts", /10/],
    ["maxRestarts 0", { restart: "on-failure", maxRestarts: 0 }, "maxRestarts", /1/],
  ])("refuses %s with a 400 naming the field, creating nothing", async (_what, body, field, message) => {
    const t = await tenantWith(100);
    const node = await h.connectedNode(op.token);
    const r = await h.call("POST", "/deployments", { token: t.token, body: { nodeId: node.id, customImage: "busybox:1.36", ...body } });
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe("VALIDATION_ERROR");
    const detail = r.json.error.details.find((d: { field: string }) => d.field === field);
    expect(detail?.message, JSON.stringify(r.json.error)).toMatch(message);
    expect((await h.deps.repos.deployments.list({ userId: t.user.id, page: 1, limit: 10 })).rows).toEqual([]);
    expect((await h.deps.repos.ledger.balance(t.user.id)).reservedMicro).toBe(0);
    await node.agent.close();
  });

  it("reads maxRestarts alone as on-failure, as Docker's on-failure:N, and refuses it beside restart no", async () => {
    const t = await tenantWith(100);
    const node = await h.connectedNode(op.token);
    const alone = await h.deploy(t.token, node.id, node.agent, { maxRestarts: 7 });
    expect(await h.getDeployment(alone.id, t.token)).toMatchObject({ restart: "on-failure", maxRestarts: 7 });
    const r = await h.call("POST", "/deployments", { token: t.token, body: { nodeId: node.id, customImage: "busybox:1.36", restart: "no", maxRestarts: 2 } });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({
      code: "RESTART_POLICY_CONFLICT",
      message: 'maxRestarts was given with restart "no": leave it out, or give restart "on-failure"',
    });
    expect((await h.deps.repos.deployments.list({ userId: t.user.id, page: 1, limit: 10 })).rows).toHaveLength(1);
    await node.agent.close();
  });

  it("refuses at create, holding nothing, an image the node reported without CMD or ENTRYPOINT unless a command is given", async () => {
    const t = await tenantWith(1000);
    const node = await h.registerNode(op.token);
    const { agent } = await SimAgent.connect(h.url, node.agentToken, { imagesWithoutCommand: ["bare:latest", "ghcr.io/acme/tool:1"] });
    await eventually(async () => expect((await h.deps.repos.nodes.get(node.id))?.status).toBe("online"));
    const create = (body: Record<string, unknown>) => h.call("POST", "/deployments", { token: t.token, body: { nodeId: node.id, ...body } });

    for (const customImage of ["bare", "bare:latest", "ghcr.io/acme/tool:1"]) {
      const r = await create({ customImage });
      expect(r.status).toBe(422);
      expect(r.json.error).toMatchObject({
        code: "IMAGE_HAS_NO_COMMAND",
        message: `node ${node.id} holds ${customImage} with neither a CMD nor an ENTRYPOINT, and runs its own copy as it is: give a command, e.g. cm deploy --image ${customImage} -- CMD ARGS..., or "command" in the body`,
      });
    }
    expect((await h.deps.repos.ledger.balance(t.user.id)).reservedMicro).toBe(0);
    expect((await h.deps.repos.nodes.get(node.id))?.activeDeployments).toBe(0);
    // A command, an entrypoint, or another tag of it: the node can run them, or only it can tell.
    expect((await create({ customImage: "bare", command: ["sh"] })).status).toBe(201);
    expect((await create({ customImage: "bare", entrypoint: ["/bin/sh"] })).status).toBe(201);
    expect((await create({ customImage: "bare:2" })).status).toBe(201);
    await agent.close();
  });

  it("restarts a failing container as new runs up to maxRestarts, billing the running time and the restarts' waits, then fails saying so", async () => {
    const t = await tenantWith(1000);
    const node = await h.connectedNode(op.token, { hourlyRateCents: 50 });
    const body = { command: ["sh", "-c", "sleep 60; exit 1"], restart: "on-failure", maxRestarts: 2 };
    const { id, spec } = await h.deploy(t.token, node.id, node.agent, body);
    await h.run(node.agent, spec, t.token);
    let run = spec;

    for (const n of [1, 2]) {
      h.clock.advance(60 * S);
      node.agent.report(run, "exited", { exitCode: 1, reason: "the container exited with code 1" });
      // One move: running to starting, as a new run the agent is told to start; the slot and the hold are kept.
      const restart = await node.agent.command(id, "start");
      // The node waits the restart's backoff first: 1 s, then 2 s.
      expect(restart.deployment).toMatchObject({ runSeq: run.runSeq + 1, desiredState: "running", command: body.command, startDelayMs: n * 1000 });
      expect(await h.getDeployment(id, t.token)).toMatchObject({
        status: "starting",
        restartCount: n,
        exitCode: 1,
        statusReason: `the container exited with code 1; restarting (${n} of 2) in ${n} s`,
      });
      // Charged up to the exit, the earlier restarts' waits (1 s before run 2) included; the hold is what is left of the hour.
      const charged = costMicro(50, (n * 60 + (n * (n - 1)) / 2) * S);
      expect(await row(id)).toMatchObject({ totalCostMicro: charged });
      expect((await row(id)).reservedMicro).toBeGreaterThan(0);
      expect((await h.deps.repos.nodes.get(node.id))?.activeDeployments).toBe(1);
      // Nothing is charged while it is starting; the wait (n s) is, once the run runs, and never the rest of a slow start.
      h.clock.advance(30 * S);
      node.agent.heartbeat();
      await h.deps.metering.tick();
      expect((await row(id)).totalCostMicro).toBe(charged);
      run = restart.deployment;
      node.agent.report(run, "starting");
      node.agent.report(run, "running");
      await eventually(async () =>
        expect(await h.getDeployment(id, t.token)).toMatchObject({ status: "running", statusReason: `running again after restart ${n} of 2` }),
      );
    }

    h.clock.advance(60 * S);
    node.agent.report(run, "exited", { exitCode: 1, reason: "the container exited with code 1" });
    // Ended by itself: exited, whatever the code; the reason says the restarts are spent.
    await eventually(async () => expect((await h.getDeployment(id, t.token)).status).toBe("exited"));
    expect(await h.getDeployment(id, t.token)).toMatchObject({
      restartCount: 2,
      exitCode: 1,
      statusReason: "the container exited with code 1; not restarted: all 2 restarts were used",
    });
    // Three runs of 60 s, and the waits of 1 s and 2 s that held the slot before the second and third.
    expect(await row(id)).toMatchObject({ reservedMicro: 0, billedMs: 183 * S, totalCostMicro: costMicro(50, 183 * S) });
    expect((await h.deps.repos.nodes.get(node.id))?.activeDeployments).toBe(0);
    await h.checkBooks(t.user.id);

    // The tenant's start is a fresh start: the restarts are counted anew.
    const started = await h.call("POST", `/deployments/${id}/start`, { token: t.token });
    expect(started.json.deployment).toMatchObject({ status: "starting", restartCount: 0 });
    await node.agent.close();
  });

  it("does not restart a clean exit, a deployment without the policy, or one being stopped", async () => {
    const t = await tenantWith(1000);
    const node = await h.connectedNode(op.token);
    const clean = await h.deploy(t.token, node.id, node.agent, { restart: "on-failure" });
    const plain = await h.deploy(t.token, node.id, node.agent);
    for (const d of [clean, plain]) await h.run(node.agent, d.spec, t.token);
    node.agent.report(clean.spec, "exited", { exitCode: 0 });
    node.agent.report(plain.spec, "exited", { exitCode: 1 });
    await eventually(async () => expect((await h.getDeployment(clean.id, t.token)).status).toBe("exited"));
    await eventually(async () => expect((await h.getDeployment(plain.id, t.token)).status).toBe("exited"));
    expect(await h.getDeployment(plain.id, t.token)).toMatchObject({ restart: "no", restartCount: 0, statusReason: "the container exited with code 1" });

    const stopping = await h.deploy(t.token, node.id, node.agent, { restart: "on-failure" });
    await h.run(node.agent, stopping.spec, t.token);
    await h.call("POST", `/deployments/${stopping.id}/stop`, { token: t.token });
    node.agent.report(stopping.spec, "exited", { exitCode: 137 });
    await eventually(async () => expect((await h.getDeployment(stopping.id, t.token)).status).toBe("stopped"));
    expect((await h.getDeployment(stopping.id, t.token)).restartCount).toBe(0);
    await node.agent.close();
  });
});
