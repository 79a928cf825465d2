import { describeEachDatabase, sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentHarness, startAgentHarness } from "../agents/support/agent-harness";
import { type Harness, startHarness, TestClock } from "../support/harness";
import { openSse as open, until } from "./support/sse-client";

describe("GET /deployments/:id/logs/stream", () => {
  let h: Harness;
  let tenant: Awaited<ReturnType<Harness["signIn"]>>;
  let nodeId: string;
  let seq = 0;
  beforeAll(async () => {
    h = await startHarness(sqliteDatabase, { overrides: { clock: new TestClock(Date.now()) } });
    tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 1_000);
    nodeId = (await h.onlineNode((await h.signIn()).token)).id;
  });
  afterAll(() => h.close());

  const deploy = async () =>
    (await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId, customImage: "busybox:1.36" } })).json.deployment.id as string;
  // Stored straight into the database, as another replica would: no notice here, so these arrive through the fallback read.
  const add = (id: string, ...messages: string[]) => {
    const ts = new Date().toISOString();
    return h.deps.repos.logIngest.append(
      id,
      messages.map((message) => ({ seq: ++seq, ts, tsMs: Date.parse(ts), stream: "stdout" as const, message })),
    );
  };
  const messages = (events: Array<{ event?: string; data?: string }>) => events.filter((e) => e.data && !e.event).map((e) => JSON.parse(e.data!).message);

  it("sends the tail first, then each new line with its id, then end once the deployment stopped", async () => {
    const id = await deploy();
    await add(id, "one", "two", "three");
    const s = await open(`${h.url}/deployments/${id}/logs/stream?tail=2`, tenant.token);
    expect(s.res.status).toBe(200);
    expect(s.res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    await until("the tail", () => messages(s.events).length === 2);
    await add(id, "four");
    await until("a new line", () => messages(s.events).length === 3);
    expect(messages(s.events)).toEqual(["two", "three", "four"]);
    const ids = s.events.filter((e) => e.data && !e.event).map((e) => Number(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(JSON.parse(s.events.find((e) => e.data)!.data!)).toMatchObject({ timestamp: expect.any(String), stream: "stdout", message: "two" });

    await h.call("POST", `/deployments/${id}/stop`, { token: tenant.token });
    await add(id, "last words");
    await s.done;
    expect(messages(s.events)).toEqual(["two", "three", "four", "last words"]);
    expect(s.events.at(-1)).toMatchObject({ event: "end" });
    expect(JSON.parse(s.events.at(-1)!.data!)).toMatchObject({ status: "stopped" });
  });

  it("resumes after Last-Event-ID with no line lost or repeated", async () => {
    const id = await deploy();
    await add(id, "a", "b");
    const first = await open(`${h.url}/deployments/${id}/logs/stream`, tenant.token);
    await until("two lines", () => messages(first.events).length === 2);
    const lastId = first.events.filter((e) => e.id).at(-1)!.id!;
    first.close();
    await add(id, "c", "d");
    const again = await open(`${h.url}/deployments/${id}/logs/stream?tail=100`, tenant.token, { "last-event-id": lastId });
    await until("the lines missed", () => messages(again.events).length === 2);
    expect(messages(again.events)).toEqual(["c", "d"]);
    again.close();
  });

  it("hands a cursor before any line, so a reconnect does not replay the tail", async () => {
    const id = await deploy();
    const s = await open(`${h.url}/deployments/${id}/logs/stream`, tenant.token);
    await until("the cursor", () => s.events.length === 1);
    expect(s.events[0]).toEqual({ id: expect.stringMatching(/^\d+$/) });
    s.close();
  });

  it("sends a comment when nothing was sent for 15 s, so proxies keep a quiet stream open", async () => {
    const id = await deploy();
    const s = await open(`${h.url}/deployments/${id}/logs/stream`, tenant.token);
    await until("a keep-alive comment", () => s.comments() > 0, 20_000);
    expect(s.events).toHaveLength(1);
    s.close();
  }, 30_000);

  it("needs the owner's bearer token: 401 without, DEPLOYMENT_NOT_FOUND for another tenant", async () => {
    const id = await deploy();
    expect((await h.call("GET", `/deployments/${id}/logs/stream`)).status).toBe(401);
    const other = await h.signIn();
    const r = await h.call("GET", `/deployments/${id}/logs/stream`, { token: other.token });
    expect(r.status).toBe(404);
    expect(r.json.error.code).toBe("DEPLOYMENT_NOT_FOUND");
  });

  it("answers bad tail, since and Last-Event-ID with VALIDATION_ERROR naming where, never a stream", async () => {
    // One of the tenant's deployments: the node may have no room left for another.
    const id = (await h.call("GET", "/deployments", { token: tenant.token })).json.deployments[0]?.id ?? (await deploy());
    for (const [query, headers, where, field] of [
      ["?tail=0", {}, "query", "tail"],
      ["?tail=ten", {}, "query", "tail"],
      ["?since=yesterday", {}, "query", "since"],
      ["", { "last-event-id": "line-7" }, "header", "last-event-id"],
    ] as const) {
      const r = await h.call("GET", `/deployments/${id}/logs/stream${query}`, { token: tenant.token, headers });
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ code: "VALIDATION_ERROR", requestId: expect.any(String), details: [{ field }] });
      expect(r.json.error.message).toMatch(new RegExp(`^invalid ${where}: ${field} `));
    }
  });

  it("tells a failure on our side as an error event in the API's error shape, not the store's own words, and ends", async () => {
    // One of the tenant's deployments: the node may have no room left for another.
    const id = (await h.call("GET", "/deployments", { token: tenant.token })).json.deployments[0]?.id ?? (await deploy());
    const tailStart = h.deps.repos.logs.tailStart;
    h.deps.repos.logs.tailStart = async () => {
      throw new Error("SQLITE_IOERR: disk I/O error at /var/lib/cm/cm.db");
    };
    try {
      const s = await open(`${h.url}/deployments/${id}/logs/stream`, tenant.token);
      await s.done;
      const failed = s.events.find((e) => e.event === "error");
      expect(JSON.parse(failed!.data!)).toEqual({
        error: { code: "INTERNAL_ERROR", message: "the log stream failed on our side; reconnect to resume it", requestId: s.res.headers.get("x-request-id") },
      });
      expect(JSON.stringify(s.events)).not.toMatch(/SQLITE|cm\.db/);
    } finally {
      h.deps.repos.logs.tailStart = tailStart;
    }
  });

  it("is in the document as text/event-stream with bearer security", async () => {
    const op = (await h.call("GET", "/openapi.json")).json.paths["/deployments/{id}/logs/stream"].get;
    expect(op.security).toEqual([{ bearer: [] }]);
    expect(op.responses["200"].content).toHaveProperty("text/event-stream");
    expect(op.parameters.map((p: { name: string }) => p.name)).toEqual(expect.arrayContaining(["tail", "since", "last-event-id"]));
  });
});

describeEachDatabase("GET /deployments/:id/logs/stream on $name, lines from an agent", (db) => {
  let h: AgentHarness;
  beforeAll(async () => {
    // A fallback read of the store far longer than the wait below: a line can only arrive through the wake-up.
    // 64 KiB a second per node (256 KiB at once), so that a batch can be refused and sent again after later ones.
    h = await startAgentHarness(db, { STREAM_FALLBACK_MS: 600_000, LOG_INGEST_BYTES_PER_S: 64 * 1024 });
  });
  afterAll(() => h.close());

  /** A running deployment on its own node, and a follower of its log stream that has its cursor. */
  async function followedDeployment() {
    const tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 1_000);
    const node = await h.connectedNode((await h.signIn()).token);
    const { id, spec } = await h.deploy(tenant.token, node.id, node.agent);
    await h.run(node.agent, spec, tenant.token);
    const s = await open(`${h.url}/deployments/${id}/logs/stream`, tenant.token);
    await until("the cursor", () => s.events.length === 1);
    return { node, id, s };
  }

  it("wakes the follower when the agent's lines are stored, without waiting for the fallback read", async () => {
    const { node, id, s } = await followedDeployment();
    const ship = async (seq: number, message: string) => {
      node.agent.send({ type: "logs", deploymentId: id, lines: [{ seq, ts: new Date(h.clock.now()).toISOString(), stream: "stdout", message }] });
      await node.agent.next("logs_ack", (a) => a.deploymentId === id && a.cursor.seq === seq);
    };
    await ship(1, "first");
    await until("the first line", () => s.events.length === 2);
    await ship(2, "second");
    await until("the second line", () => s.events.length === 3);
    expect(s.events.slice(1).map((e) => [e.id, JSON.parse(e.data!).message])).toEqual([
      ["1", "first"],
      ["2", "second"],
    ]);
    s.close();
    await node.agent.close();
  });

  it("sends a refused batch's lines when the agent sends it again after later lines were stored, ids never going back", async () => {
    const { node, id, s } = await followedDeployment();
    const ts = new Date(h.clock.now()).toISOString();
    const lines = (from: number, n: number, size: number) =>
      Array.from({ length: n }, (_, i) => ({ seq: from + i, ts, stream: "stdout" as const, message: `${from + i} ${"x".repeat(size)}` }));
    node.agent.send({ type: "logs", deploymentId: id, lines: lines(1, 10, 10_000) });
    await node.agent.next("logs_ack");
    // More than the burst has left: refused. The agent's next batch fits, is stored, and tells it the first was refused.
    const refused = lines(11, 30, 10_000);
    node.agent.send({ type: "logs", deploymentId: id, lines: refused });
    expect((await node.agent.next("error")).code).toBe("LOGS_RATE_LIMITED");
    node.agent.send({ type: "logs", deploymentId: id, lines: lines(41, 1, 0) });
    await node.agent.next("logs_ack");
    await until("line 41", () => s.events.some((e) => e.data && JSON.parse(e.data).message.startsWith("41 ")));
    h.clock.advance(5_000);
    node.agent.send({ type: "logs", deploymentId: id, lines: refused });
    await node.agent.next("logs_ack");
    const seqs = () => s.events.filter((e) => e.data).map((e) => Number(JSON.parse(e.data!).message.split(" ")[0]));
    await until("the lines sent again", () => seqs().length === 41);
    expect([...seqs()].sort((a, b) => a - b)).toEqual(Array.from({ length: 41 }, (_, i) => i + 1));
    // The id is the cursor a reconnect resumes after: it never goes back, so resuming repeats nothing.
    const ids = s.events.filter((e) => e.data).map((e) => Number(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(ids.at(-1)).toBe(41);
    s.close();
    await node.agent.close();
  });
});
