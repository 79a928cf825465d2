import { AGENT_WHOAMI_PATH, CLOSE_CODES, CURRENT_PROTOCOL_VERSION, retiredNodeOf } from "@cm/protocol";
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import WebSocket from "ws";
import { BYTES_BEFORE_READY } from "../../src/agents/agent-hub";
import { type AgentHarness, eventually, startAgentHarness } from "./support/agent-harness";
import { GPU, SimAgent, SPECS } from "./support/sim-agent";

describeEachDatabase("agent connection on $name", (db) => {
  let h: AgentHarness;
  let op: Awaited<ReturnType<AgentHarness["signIn"]>>;

  beforeAll(async () => {
    h = await startAgentHarness(db, { AGENT_HELLO_TIMEOUT_MS: 300 });
    op = await h.signIn();
  });
  afterAll(() => h.close());

  const hello = (token: string, protocolVersions = [CURRENT_PROTOCOL_VERSION]) => ({ type: "hello", token, agentVersion: "sim-1", protocolVersions });

  it("refuses an unknown token with an error frame and 4401", async () => {
    const a = await SimAgent.open(h.url);
    a.send(hello("cmn_not-a-token"));
    expect((await a.next("error")).code).toBe("UNAUTHORIZED");
    expect((await a.closed).code).toBe(CLOSE_CODES.UNAUTHORIZED);
  });

  it("tells a retired node's live agent to drain, and refuses its token at hello with 4410 naming the node", async () => {
    const node = await h.connectedNode(op.token);
    expect((await h.call("DELETE", `/operator/nodes/${node.id}`, { token: op.token })).status).toBe(200);
    // Left open so its last log lines can still arrive; the agent closes when done.
    expect((await node.agent.next("retired")).message).toContain(node.id);
    await node.agent.close();
    const again = await SimAgent.open(h.url);
    again.send(hello(node.agentToken));
    expect((await again.next("error")).code).toBe("NODE_RETIRED");
    const closed = await again.closed;
    expect(closed.code).toBe(CLOSE_CODES.RETIRED);
    expect(retiredNodeOf(closed.reason)).toBe(node.id);
    expect((await h.call("GET", `/nodes/${node.id}`)).status).toBe(404);
  });

  it("answers which node an agent token belongs to without taking over its session or marking it online", async () => {
    const away = await h.registerNode(op.token);
    const whoami = (token: string) => fetch(`${h.url}${AGENT_WHOAMI_PATH}`, { headers: { authorization: `Bearer ${token}` } });
    const r = await whoami(away.agentToken);
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ nodeId: away.id, name: "gpu-box" });
    expect((await h.call("GET", `/nodes/${away.id}`)).json.node.status).toBe("offline");

    const live = await h.connectedNode(op.token);
    expect((await whoami(live.agentToken)).status).toBe(200);
    // Still the node's session: a command reaches it.
    const t = await h.signIn();
    await h.grantCredits(t.user.id, 100);
    await h.deploy(t.token, live.id, live.agent);

    const wrong = await whoami("cmn_not-a-token");
    expect(wrong.status).toBe(401);
    expect((await wrong.json()).error.code).toBe("UNAUTHORIZED");
    expect((await fetch(`${h.url}${AGENT_WHOAMI_PATH}`)).status).toBe(401);
    expect((await h.call("DELETE", `/operator/nodes/${away.id}`, { token: op.token })).status).toBe(200);
    expect((await (await whoami(away.agentToken)).json()).error.message).toMatch(new RegExp(`^node ${away.id} was retired on `));
  });

  it("refuses an agent that speaks no protocol version it knows with 4406", async () => {
    const node = await h.registerNode(op.token);
    const a = await SimAgent.open(h.url);
    a.send(hello(node.agentToken, [0, 99]));
    expect((await a.next("error")).code).toBe("UNSUPPORTED_PROTOCOL");
    expect((await a.closed).code).toBe(CLOSE_CODES.UNSUPPORTED_PROTOCOL);
    expect((await h.call("GET", `/nodes/${node.id}`)).json.node.status).toBe("offline");
  });

  it("closes a connection that sends no hello in time with 4408", async () => {
    const a = await SimAgent.open(h.url);
    expect((await a.next("error")).code).toBe("HELLO_TIMEOUT");
    expect((await a.closed).code).toBe(CLOSE_CODES.HELLO_TIMEOUT);
  });

  it("cuts off a socket that sends more than a hello's worth before it is welcomed", async () => {
    const big = await SimAgent.open(h.url);
    const received: string[] = [];
    big.ws.on("message", (m) => received.push(m.toString()));
    // Far below the frame limit, far above any hello: a socket without a token may not hold that much.
    big.sendRaw(JSON.stringify({ type: "hello", token: "x".repeat(BYTES_BEFORE_READY * 4), agentVersion: "1", protocolVersions: [1] }));
    expect((await big.closed).code).toBe(1006);
    expect(received).toEqual([]); // not read as a frame: no error frame, no welcome
    // Small garbage before hello is still answered frame by frame, and a real agent still gets in.
    const node = await h.connectedNode(op.token);
    node.agent.send({ type: "specs", specs: SPECS, gpus: Array.from({ length: 64 }, (_, i) => ({ ...GPU, index: i, uuid: `GPU-${i}` })) });
    await eventually(async () => expect((await h.call("GET", `/nodes/${node.id}`)).json.node.gpus).toHaveLength(64));
    await node.agent.close();
  });

  it("answers garbage with error frames, closes with 4400 after 20, and keeps serving", async () => {
    const a = await SimAgent.open(h.url);
    const garbage = ["not json", "{}", JSON.stringify({ type: "nope" }), JSON.stringify({ type: "heartbeat" }), "[1,2]", "null"];
    for (let i = 0; i < 20; i++) a.sendRaw(garbage[i % garbage.length]!);
    const first = await a.next("error");
    expect(first.code).toBe("BAD_FRAME");
    expect(first.message).toMatch(/JSON/);
    expect((await a.closed).code).toBe(CLOSE_CODES.BAD_FRAMES);
    expect(a.pending().filter((f) => f.type === "error")).toHaveLength(19);
    // Binary frames and frames before hello count too, one error frame each.
    const b = await SimAgent.open(h.url);
    b.sendRaw(Buffer.from([1, 2, 3]));
    b.send({ type: "heartbeat", sentAt: 1 });
    expect((await b.next("error")).message).toMatch(/binary/);
    expect((await b.next("error")).message).toMatch(/first frame must be hello/);
    b.ws.terminate();
    expect((await h.call("GET", "/health")).status).toBe(200);
    const node = await h.connectedNode(op.token);
    node.agent.sendRaw("{oops");
    expect((await node.agent.next("error")).code).toBe("BAD_FRAME");
    expect(h.deps.agents.isConnected(node.id)).toBe(true);
    await node.agent.close();
  });

  it("refuses a specs frame that breaks a bound, stores none of it, and keeps the catalogue serving", async () => {
    const node = await h.registerNode(op.token, { hourlyRateCents: 70 });
    const { agent } = await SimAgent.connect(h.url, node.agentToken, { specs: false });
    const gpus = (n: number) => Array.from({ length: n }, (_, i) => ({ ...GPU, index: i, uuid: `GPU-${i}` }));
    const lies: Array<[string, Record<string, unknown>]> = [
      ["specs.cpuModel", { specs: { ...SPECS, cpuModel: "x".repeat(14 * 1024 * 1024) }, gpus: gpus(1) }],
      ["specs.ramMb", { specs: { ...SPECS, ramMb: 2 ** 53 }, gpus: gpus(1) }],
      ["specs.cpuThreads", { specs: { ...SPECS, cpuThreads: -5 }, gpus: gpus(1) }],
      ["gpus", { specs: SPECS, gpus: gpus(65) }],
      ["specs.os", { specs: { ...SPECS, os: "Linux\u0000" }, gpus: gpus(1) }],
    ];
    for (const [field, frame] of lies) {
      agent.send({ type: "specs", ...frame });
      const error = await agent.next("error");
      expect(error.code).toBe("BAD_FRAME");
      expect(error.message).toContain(`${field}:`);
    }
    const stored = (await h.call("GET", `/nodes/${node.id}`)).json.node;
    expect(stored.gpus).toEqual([]);
    expect(stored.specs.cpuModel).not.toMatch(/^x+$/);
    expect((await h.call("GET", "/nodes?limit=100")).status).toBe(200);
    // A true report afterwards is taken as usual.
    agent.send({ type: "specs", specs: SPECS, gpus: gpus(2) });
    await eventually(async () => expect((await h.call("GET", `/nodes/${node.id}`)).json.node.gpus).toHaveLength(2));
    expect(h.deps.agents.isConnected(node.id)).toBe(true);
    await agent.close();
  });

  it("answers hello with welcome and the sync, and shows the node online with its inventory", async () => {
    const node = await h.registerNode(op.token, { hourlyRateCents: 70 });
    expect((await h.call("GET", `/nodes/${node.id}`)).json.node.status).toBe("offline");
    const { agent, welcome, sync } = await SimAgent.connect(h.url, node.agentToken, { gpus: 2 });
    expect(welcome).toMatchObject({ protocolVersion: CURRENT_PROTOCOL_VERSION, nodeId: node.id, heartbeatIntervalMs: 10_000, serverTime: h.clock.now() });
    expect(sync.deployments).toEqual([]);
    const detail = await eventually(async () => {
      const n = (await h.call("GET", `/nodes/${node.id}`)).json.node;
      expect(n.gpus).toHaveLength(2);
      return n;
    });
    expect(detail).toMatchObject({ status: "online", specs: SPECS, lastHeartbeat: new Date(h.clock.now()).toISOString() });
    expect(detail.gpus[0]).toEqual({
      name: GPU.name,
      vramMb: GPU.vramMb,
      computeVersion: GPU.computeVersion,
      brand: GPU.brand,
      computeCores: GPU.computeCores,
      tensorCores: GPU.tensorCores,
      driverVersion: GPU.driverVersion,
    });
    const listed = (await h.call("GET", "/nodes?status=online&hasGpu=true&limit=100")).json.nodes;
    expect(listed.map((n: { id: string }) => n.id)).toContain(node.id);
    expect(h.deps.agents.isConnected(node.id)).toBe(true);
    await agent.close();
  });

  it("lets a second connection with the same token replace the first (4409) without the node going offline", async () => {
    const node = await h.connectedNode(op.token);
    const second = await SimAgent.connect(h.url, node.agentToken);
    expect((await node.agent.closed).code).toBe(CLOSE_CODES.REPLACED);
    expect((await h.call("GET", `/nodes/${node.id}`)).json.node.status).toBe("online");
    expect(h.deps.agents.isConnected(node.id)).toBe(true);
    second.agent.send({ type: "heartbeat", sentAt: 1 });
    await second.agent.close();
  });

  it("marks a node offline after three missed heartbeats, and back online when its agent returns", async () => {
    const node = await h.connectedNode(op.token);
    for (let i = 0; i < 5; i++) {
      h.clock.advance(10_000);
      node.agent.heartbeat();
      // Heartbeats are written in batches; the monitor flushes before it judges.
      await eventually(async () => {
        await h.deps.agents.heartbeats.flush();
        expect((await h.deps.repos.nodes.get(node.id))?.lastHeartbeat).toBe(h.clock.now());
      });
      await h.deps.agents.tick();
    }
    const beat = h.clock.now();
    expect((await h.call("GET", `/nodes/${node.id}`)).json.node).toMatchObject({ status: "online", lastHeartbeat: new Date(beat).toISOString() });
    h.clock.advance(30_000);
    await h.deps.agents.tick();
    expect((await h.call("GET", `/nodes/${node.id}`)).json.node.status).toBe("online");
    h.clock.advance(1);
    await h.deps.agents.tick();
    expect((await h.call("GET", `/nodes/${node.id}`)).json.node.status).toBe("offline");
    // The silent socket was dropped; the agent's reconnect brings the node back.
    await node.agent.closed;
    expect(h.deps.agents.isConnected(node.id)).toBe(false);
    const back = await SimAgent.connect(h.url, node.agentToken);
    expect((await h.call("GET", `/nodes/${node.id}`)).json.node.status).toBe("online");
    await back.agent.close();
  });

  it("gives a closed socket three heartbeat intervals to come back before the node is offline", async () => {
    const node = await h.connectedNode(op.token);
    h.clock.advance(60_000);
    await h.beat(node.agent, node.id);
    await node.agent.close();
    h.clock.advance(20_000);
    await h.deps.agents.tick();
    expect((await h.call("GET", `/nodes/${node.id}`)).json.node.status).toBe("online");
    h.clock.advance(11_000);
    await h.deps.agents.tick();
    await eventually(async () => expect((await h.call("GET", `/nodes/${node.id}`)).json.node.status).toBe("offline"));
  });

  it("leaves other upgrade paths to others: 404 there", async () => {
    const ws = new WebSocket(h.url.replace("http", "ws") + "/somewhere/else");
    const status = await new Promise<number | undefined>((resolve) => {
      ws.on("unexpected-response", (_req, res) => resolve(res.statusCode));
      ws.on("error", () => resolve(undefined));
    });
    expect(status).toBe(404);
  });
});
