import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type AgentHarness, eventually, startAgentHarness } from "../agents/support/agent-harness";
import { openSse, until } from "./support/sse-client";

describeEachDatabase("GET /deployments/:id/events on $name", (db) => {
  let h: AgentHarness;
  let op: Awaited<ReturnType<AgentHarness["signIn"]>>;
  beforeAll(async () => {
    // No fallback read within a test: each change must arrive through its notice.
    h = await startAgentHarness(db, { STREAM_FALLBACK_MS: 600_000 });
    op = await h.signIn();
  });
  afterAll(() => h.close());

  async function setUp() {
    const tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 1_000);
    const node = await h.connectedNode(op.token, { hourlyRateCents: 60 });
    const d = await h.deploy(tenant.token, node.id, node.agent, { ports: [8080] });
    const s = await openSse(`${h.url}/deployments/${d.id}/events`, tenant.token);
    return { tenant, node, ...d, s };
  }
  const states = (events: Array<{ event?: string; data?: string }>) => events.filter((e) => !e.event).map((e) => JSON.parse(e.data!));

  it("sends the deployment as GET /deployments/:id answers it first, then each status change, then end", async () => {
    const { tenant, node, id, spec, s } = await setUp();
    expect(s.res.status).toBe(200);
    expect(s.res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    await until("the current state", () => s.events.length === 1);
    expect(JSON.parse(s.events[0]!.data!)).toEqual(await h.getDeployment(id, tenant.token));
    expect(s.events[0]!.id).toBe("1");

    node.agent.report(spec, "pulling");
    await until("pulling", () => states(s.events).some((d) => d.status === "pulling"));
    await h.run(node.agent, spec, tenant.token);
    await until("running", () => states(s.events).some((d) => d.status === "running"));
    expect(states(s.events).at(-1)).toEqual(await h.getDeployment(id, tenant.token));

    await h.call("POST", `/deployments/${id}/stop`, { token: tenant.token });
    node.agent.report(spec, "stopped");
    await s.done;
    const seen = states(s.events).map((d) => d.status);
    expect(seen.slice(0, 2)).toEqual(["pending", "pulling"]);
    expect(seen.slice(-2)).toEqual(["stopping", "stopped"]);
    expect(s.events.at(-1)).toMatchObject({ event: "end" });
    expect(JSON.parse(s.events.at(-1)!.data!)).toEqual({ status: "stopped" });
    const ids = s.events.filter((e) => e.id).map((e) => Number(e.id));
    expect(ids).toEqual(ids.map((_, i) => i + 1));
    await node.agent.close();
  });

  it("sends an endpoint becoming ready and each charge, which move no status", async () => {
    const { tenant, node, id, spec, s } = await setUp();
    await h.run(node.agent, spec, tenant.token);
    await until("running", () => states(s.events).some((d) => d.status === "running"));
    expect(states(s.events).at(-1).endpoints).toMatchObject([{ internalPort: 8080, ready: false }]);

    node.agent.send({ type: "endpoints", deploymentId: id, ports: [{ port: 8080, ready: true }] });
    await until("the endpoint ready", () => states(s.events).at(-1).endpoints[0]?.ready === true);

    h.clock.advance(60_000);
    await h.beat(node.agent, node.id, [id]);
    await h.deps.metering.tick();
    await until("the charge", () => states(s.events).at(-1).totalCost > 0);
    expect(states(s.events).at(-1)).toMatchObject({ status: "running", totalCost: 1 });
    expect(states(s.events).at(-1)).toEqual(await h.getDeployment(id, tenant.token));
    s.close();
    await node.agent.close();
  });

  it("ends with status deleted when the deployment is deleted", async () => {
    const { tenant, node, id, s } = await setUp();
    await until("the current state", () => s.events.length === 1);
    await h.call("DELETE", `/deployments/${id}`, { token: tenant.token });
    await s.done;
    expect(s.events.at(-1)).toMatchObject({ event: "end" });
    expect(JSON.parse(s.events.at(-1)!.data!)).toEqual({ status: "deleted" });
    await node.agent.close();
  });

  it("sends the state and end at once for a deployment that has already ended", async () => {
    const { tenant, node, id, spec, s } = await setUp();
    s.close();
    await h.call("POST", `/deployments/${id}/stop`, { token: tenant.token });
    node.agent.report(spec, "stopped");
    await eventually(async () => expect((await h.getDeployment(id, tenant.token)).status).toBe("stopped"));
    const again = await openSse(`${h.url}/deployments/${id}/events`, tenant.token, { "last-event-id": "7" });
    await again.done;
    expect(again.events.map((e) => [e.id, e.event])).toEqual([
      ["8", undefined],
      [undefined, "end"],
    ]);
    expect(states(again.events)[0]).toMatchObject({ status: "stopped" });
    await node.agent.close();
  });

  it("needs the owner's bearer token: 401 without, DEPLOYMENT_NOT_FOUND for another tenant", async () => {
    const { node, id, s } = await setUp();
    s.close();
    expect((await h.call("GET", `/deployments/${id}/events`)).status).toBe(401);
    const other = await h.signIn();
    const r = await h.call("GET", `/deployments/${id}/events`, { token: other.token });
    expect(r.status).toBe(404);
    expect(r.json.error.code).toBe("DEPLOYMENT_NOT_FOUND");
    const plain = (await h.call("GET", `/deployments/${id}`, { token: other.token })).json;
    expect({ ...r.json.error, requestId: undefined }).toEqual({ ...plain.error, requestId: undefined });
    await node.agent.close();
  });

  it("answers a Last-Event-ID it never sent with VALIDATION_ERROR naming the header, not the body", async () => {
    const { tenant, node, id, s } = await setUp();
    s.close();
    for (const bad of ["abc", "-1", "1e3", "9999999999999999"]) {
      const r = await h.call("GET", `/deployments/${id}/events`, { token: tenant.token, headers: { "last-event-id": bad } });
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ code: "VALIDATION_ERROR", requestId: expect.any(String), details: [{ field: "last-event-id" }] });
      expect(r.json.error.message).toMatch(/^invalid header: last-event-id /);
    }
    await node.agent.close();
  });

  it("sends a comment when nothing was sent for 15 s, so proxies keep a quiet stream open", async () => {
    const { node, s } = await setUp();
    await until("a keep-alive comment", () => s.comments() > 0, 20_000);
    expect(s.events).toHaveLength(1);
    s.close();
    await node.agent.close();
  }, 30_000);

  it("is in the document as text/event-stream with bearer security", async () => {
    const op = (await h.call("GET", "/openapi.json")).json.paths["/deployments/{id}/events"].get;
    expect(op.security).toEqual([{ bearer: [] }]);
    expect(op.responses["200"].content).toHaveProperty("text/event-stream");
    expect(op.parameters.map((p: { name: string }) => p.name)).toEqual(expect.arrayContaining(["id", "last-event-id"]));
  });
});
