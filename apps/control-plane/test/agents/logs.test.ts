import type { LogLineFrame } from "@cm/protocol";
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { openSse, until } from "../api/support/sse-client";
import { type AgentHarness, startAgentHarness } from "./support/agent-harness";
import { SimAgent } from "./support/sim-agent";

const base = Date.UTC(2026, 10, 1, 12, 0, 0);
/** Docker's timestamps carry nanoseconds; line n is n ms after base. */
const tsOf = (seq: number) => new Date(base + seq).toISOString().replace("Z", "000001Z");
const lines = (from: number, to: number): LogLineFrame[] =>
  Array.from({ length: to - from + 1 }, (_, i) => ({
    seq: from + i,
    ts: tsOf(from + i),
    stream: (from + i) % 10 === 0 ? "stderr" : "stdout",
    message: `line ${from + i}`,
  }));

describeEachDatabase("logs from the agent on $name", (db) => {
  let h: AgentHarness;
  let op: Awaited<ReturnType<AgentHarness["signIn"]>>;
  let tenant: Awaited<ReturnType<AgentHarness["signIn"]>>;

  beforeAll(async () => {
    h = await startAgentHarness(db);
    op = await h.signIn();
    tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 10_000);
  });
  afterAll(() => h.close());

  const logs = async (id: string, query = "") =>
    (await h.call("GET", `/deployments/${id}/logs${query}`, { token: tenant.token })).json.logs as Array<{
      timestamp: string;
      stream: string;
      message: string;
      seq: number;
    }>;

  it("stores batches, acks the cursor, and serves them with tail and since; a resent batch adds nothing", async () => {
    const node = await h.connectedNode(op.token);
    const { id } = await h.deploy(tenant.token, node.id, node.agent);
    node.agent.send({ type: "logs", deploymentId: id, lines: lines(1, 200) });
    expect((await node.agent.next("logs_ack")).cursor).toEqual({ seq: 200, dockerTs: tsOf(200) });

    const last100 = await logs(id);
    expect(last100).toHaveLength(100);
    expect(last100[0]).toEqual({ timestamp: tsOf(101), stream: "stdout", message: "line 101", seq: 101 });
    expect(last100[99]).toEqual({ timestamp: tsOf(200), stream: "stderr", message: "line 200", seq: 200 });
    expect((await logs(id, "?tail=5")).map((l) => l.message)).toEqual(["line 196", "line 197", "line 198", "line 199", "line 200"]);
    const since = await logs(id, `?tail=1000&since=${encodeURIComponent(new Date(base + 150).toISOString())}`);
    expect(since.map((l) => l.message)).toEqual(lines(150, 200).map((l) => l.message));

    // After a reconnect the agent may send a batch again, overlapping what is stored.
    node.agent.send({ type: "logs", deploymentId: id, lines: lines(101, 300) });
    expect((await node.agent.next("logs_ack")).cursor).toEqual({ seq: 300, dockerTs: tsOf(300) });
    const all = await logs(id, "?tail=10000");
    expect(all.map((l) => l.message)).toEqual(lines(1, 300).map((l) => l.message));
    // Whatever a container prints is stored, even what PostgreSQL's text type cannot hold.
    node.agent.send({ type: "logs", deploymentId: id, lines: [{ seq: 301, ts: tsOf(301), stream: "stdout", message: "a\u0000b \u{1F600} é" }] });
    await node.agent.next("logs_ack");
    expect((await logs(id, "?tail=1"))[0]!.message).toBe("a\uFFFDb \u{1F600} é");
    await node.agent.close();
  });

  it("numbers each line as the stream's ids do, so a poller with since resumes exactly where lines share an instant", async () => {
    const node = await h.connectedNode(op.token);
    const { id } = await h.deploy(tenant.token, node.id, node.agent);
    const sameInstant = (from: number, to: number) => lines(from, to).map((l) => ({ ...l, ts: tsOf(1) }));
    node.agent.send({ type: "logs", deploymentId: id, lines: sameInstant(1, 3) });
    await node.agent.next("logs_ack");
    const first = await logs(id);
    expect(first.map((l) => l.seq)).toEqual([1, 2, 3]);
    node.agent.send({ type: "logs", deploymentId: id, lines: sameInstant(4, 5) });
    await node.agent.next("logs_ack");
    // Asked again from the newest line's instant: the lines read already are those numbered at or below the highest read.
    const again = await logs(id, `?since=${encodeURIComponent(first.at(-1)!.timestamp)}`);
    expect(again.filter((l) => l.seq > first.at(-1)!.seq).map((l) => l.message)).toEqual(["line 4", "line 5"]);
    const stream = await openSse(`${h.url}/deployments/${id}/logs/stream`, tenant.token);
    await until("the tail", () => stream.events.length === 5);
    expect(stream.events.map((e) => [Number(e.id), JSON.parse(e.data!).seq])).toEqual([1, 2, 3, 4, 5].map((n) => [n, n]));
    stream.close();
    await node.agent.close();
  });

  it("tells a restarted agent where to resume: the sync carries each deployment's stored cursor", async () => {
    const node = await h.connectedNode(op.token);
    const a = await h.deploy(tenant.token, node.id, node.agent);
    const b = await h.deploy(tenant.token, node.id, node.agent);
    node.agent.send({ type: "logs", deploymentId: a.id, lines: lines(1, 42) });
    await node.agent.next("logs_ack");
    const again = await SimAgent.connect(h.url, node.agentToken);
    const cursors = Object.fromEntries(again.sync.deployments.map((d) => [d.deploymentId, d.logCursor]));
    expect(cursors).toEqual({ [a.id]: { seq: 42, dockerTs: tsOf(42) }, [b.id]: { seq: 0, dockerTs: null } });
    await again.agent.close();
  });

  // How fast lines are stored is bench/logs.ts's and bench/fan-in.ts's question, not a
  // floor here: on two shared cores a floor fails for load, not for a fault.
  it("takes 50,000 lines in batches of 5,000 and keeps the newest 10,000", async () => {
    const node = await h.connectedNode(op.token);
    const { id } = await h.deploy(tenant.token, node.id, node.agent);
    const started = performance.now();
    for (let seq = 1; seq <= 50_000; seq += 5000) node.agent.send({ type: "logs", deploymentId: id, lines: lines(seq, seq + 4999) });
    await node.agent.next("logs_ack", (f) => f.cursor.seq === 50_000, 30_000);
    const linesPerS = Math.round(50_000 / ((performance.now() - started) / 1000));
    console.log(`[logs] ${db.name}: 50,000 lines over the socket at ${linesPerS} lines/s`);
    const kept = await logs(id, "?tail=10000");
    expect(kept).toHaveLength(10_000);
    expect(kept[0]!.message).toBe("line 40001");
    await node.agent.close();
  });

  it("keeps the 10,000 highest-numbered lines when batches come numbered downwards, and a follower sees just those", async () => {
    const node = await h.connectedNode(op.token);
    const { id } = await h.deploy(tenant.token, node.id, node.agent);
    const follower = await openSse(`${h.url}/deployments/${id}/logs/stream`, tenant.token);
    await until("the cursor", () => follower.events.length === 1);
    for (const from of [200_001, 100_001, 1]) {
      node.agent.send({ type: "logs", deploymentId: id, lines: lines(from, from + 4_999) });
      expect((await node.agent.next("logs_ack", undefined, 30_000)).cursor.seq).toBe(from + 4_999);
    }
    const expected = [...lines(100_001, 105_000), ...lines(200_001, 205_000)].map((l) => l.message);
    const kept = await logs(id, "?tail=10000");
    expect(kept.map((l) => l.message)).toEqual(expected);
    expect(await h.deps.repos.logs.tail(id, 100_000)).toHaveLength(10_000);

    // The follower got the higher block first and the lower one as lines stored late: each stored line once, no other.
    const got = () => follower.events.filter((e) => e.data).map((e) => JSON.parse(e.data!).message as string);
    await until("every stored line", () => got().length >= 10_000, 30_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect([...got()].sort()).toEqual([...expected].sort());
    follower.close();
    // A reader coming now gets the same log, in order.
    const later = await openSse(`${h.url}/deployments/${id}/logs/stream?tail=10000`, tenant.token);
    await until("the tail", () => later.events.length >= 10_000, 30_000);
    expect(later.events.map((e) => JSON.parse(e.data!).message)).toEqual(expected);
    later.close();
    await node.agent.close();
  });
});

describeEachDatabase("log bounds on $name", (db) => {
  let h: AgentHarness;
  let op: Awaited<ReturnType<AgentHarness["signIn"]>>;
  let tenant: Awaited<ReturnType<AgentHarness["signIn"]>>;
  beforeAll(async () => {
    // 64 KiB a second per node, 256 KiB at once.
    h = await startAgentHarness(db, { LOG_INGEST_BYTES_PER_S: 64 * 1024 });
    op = await h.signIn();
    tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 10_000);
  });
  afterAll(() => h.close());

  it("cuts long lines, restamps incredible times, and refuses what passes a node's rate until time allows it", async () => {
    const node = await h.connectedNode(op.token);
    const { id } = await h.deploy(tenant.token, node.id, node.agent);
    node.agent.send({
      type: "logs",
      deploymentId: id,
      lines: [
        { seq: 1, ts: tsOf(1), stream: "stdout", message: "z".repeat(60_000) },
        { seq: 2, ts: "1970-01-01T00:00:00.000000001Z", stream: "stdout", message: "from the epoch" },
      ],
    });
    expect((await node.agent.next("logs_ack")).cursor.seq).toBe(2);
    const stored = (await h.call("GET", `/deployments/${id}/logs`, { token: tenant.token })).json.logs;
    expect(stored[0].message).toBe(`${"z".repeat(16 * 1024)} … [line cut: 60000 characters]`);
    expect(stored[1]).toMatchObject({ message: "from the epoch", timestamp: new Date(h.clock.now()).toISOString() });

    // 300 KiB of text in one go: more than the burst left. Refused, nothing stored, the agent told why.
    const flood = Array.from({ length: 30 }, (_, i) => ({ seq: 3 + i, ts: tsOf(3 + i), stream: "stdout" as const, message: "f".repeat(10_000) }));
    node.agent.send({ type: "logs", deploymentId: id, lines: flood });
    const refused = await node.agent.next("error");
    expect(refused.code).toBe("LOGS_RATE_LIMITED");
    expect(refused.message).toContain("send it again later");
    expect((await h.call("GET", `/deployments/${id}/logs?tail=100`, { token: tenant.token })).json.logs).toHaveLength(2);
    // A new connection with the node's token starts with no fresh budget: the budget is the node's.
    const again = await SimAgent.connect(h.url, node.agentToken);
    again.agent.send({ type: "logs", deploymentId: id, lines: flood });
    expect((await again.agent.next("error")).code).toBe("LOGS_RATE_LIMITED");
    // Seconds later the same batch fits.
    h.clock.advance(5_000);
    again.agent.send({ type: "logs", deploymentId: id, lines: flood });
    expect((await again.agent.next("logs_ack")).cursor.seq).toBe(32);
    expect((await h.call("GET", `/deployments/${id}/logs?tail=100`, { token: tenant.token })).json.logs).toHaveLength(32);
    await again.agent.close();
  });
});
