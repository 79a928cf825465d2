// The control plane's half of `cm exec`, with a simulated agent: what a tenant
// sees when the node's agent never connects back (an agent older than exec, or
// one that hangs), that only the node asked can take the session, and that what
// the tenant typed before the agent was there reaches it. The whole path with a
// real agent and Docker is e2e/exec.test.ts.
import { AGENT_EXEC_PATH, EXEC_CHANNEL, EXEC_CLOSE_CODES, EXEC_MAX_SESSIONS_PER_DEPLOYMENT, EXEC_SUBPROTOCOL } from "@cm/protocol";
import { sqliteDatabase as db } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { type AgentHarness, startAgentHarness } from "./support/agent-harness";

type Received = { texts: Array<Record<string, unknown>>; closed: Promise<number> };

/** A tenant's exec connection that records the control messages it gets and how it closed. */
function openExec(base: string, id: string, token: string) {
  const ws = new WebSocket(`${base.replace(/^http/, "ws")}/deployments/${id}/exec`, [EXEC_SUBPROTOCOL], { headers: { authorization: `Bearer ${token}` } });
  const got: Received = { texts: [], closed: new Promise((r) => ws.once("close", (code) => r(code))) };
  ws.on("message", (m, isBinary) => {
    if (!isBinary) got.texts.push(JSON.parse(m.toString()));
  });
  const opened = new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  return { ws, got, opened };
}

/** The agent's side of a session: its dial-back to /agent/exec for `execId`, with an agent token. */
function dialAgentExec(base: string, execId: string, agentToken: string) {
  return new WebSocket(`${base.replace(/^http/, "ws")}${AGENT_EXEC_PATH}?id=${execId}`, { headers: { authorization: `Bearer ${agentToken}` } });
}

const stdin = (text: string) => Buffer.concat([Buffer.from([EXEC_CHANNEL.stdin]), Buffer.from(text)]);

describe("exec through a node's agent (control plane side)", () => {
  let h: AgentHarness;
  let op: Awaited<ReturnType<AgentHarness["signIn"]>>;
  let tenant: Awaited<ReturnType<AgentHarness["signIn"]>>;
  beforeAll(async () => {
    h = await startAgentHarness(db, { TUNNEL_OPEN_TIMEOUT_MS: 1_000 });
    op = await h.signIn();
    tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 100_000);
  });
  afterAll(() => h.close());

  async function runningDeployment() {
    const node = await h.connectedNode(op.token);
    const dep = await h.deploy(tenant.token, node.id, node.agent);
    await h.run(node.agent, dep.spec, tenant.token);
    return { node, dep };
  }

  it("tells the tenant the node did not open the session when its agent never connects back", async () => {
    const { node, dep } = await runningDeployment();
    const c = openExec(h.url, dep.id, tenant.token);
    await c.opened;
    c.ws.send(JSON.stringify({ type: "start", command: ["sh"], tty: false }));
    const ask = await node.agent.next("open_exec");
    expect(ask).toMatchObject({ deploymentId: dep.id, command: ["sh"], tty: false });
    // This agent says nothing and dials nothing back.
    expect(await c.got.closed).toBe(EXEC_CLOSE_CODES.FAILED);
    expect(c.got.texts).toEqual([{ type: "error", code: "NODE_UNREACHABLE", message: "the node's agent did not open the session within 1 s" }]);
  });

  it("lets only the node that was asked take the session, and hands it what the tenant typed meanwhile", async () => {
    const { node, dep } = await runningDeployment();
    const other = await h.connectedNode(op.token);
    const c = openExec(h.url, dep.id, tenant.token);
    await c.opened;
    c.ws.send(JSON.stringify({ type: "start", command: ["cat"], tty: false }));
    c.ws.send(stdin("typed early\n"));
    const ask = await node.agent.next("open_exec");

    // Another operator's agent that learnt the id cannot splice itself into the shell.
    const intruder = dialAgentExec(h.url, ask.execId, other.agentToken);
    const refused = await new Promise<number>((resolve) => intruder.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0)));
    expect(refused).toBe(403);

    const agent = dialAgentExec(h.url, ask.execId, node.agentToken);
    const first = await new Promise<Buffer>((resolve) => agent.once("message", (m) => resolve(m as Buffer)));
    expect(first).toEqual(stdin("typed early\n"));

    // The agent's output and the exit reach the tenant, and the session closes normally.
    const output = new Promise<Buffer>((resolve) => c.ws.once("message", (m, isBinary) => isBinary && resolve(m as Buffer)));
    agent.send(Buffer.concat([Buffer.from([EXEC_CHANNEL.stdout]), Buffer.from("typed early\n")]));
    expect((await output).subarray(1).toString()).toBe("typed early\n");
    agent.send(JSON.stringify({ type: "exit", code: 0 }));
    agent.close(EXEC_CLOSE_CODES.NORMAL);
    expect(await c.got.closed).toBe(EXEC_CLOSE_CODES.NORMAL);
    expect(c.got.texts).toEqual([{ type: "exit", code: 0 }]);
  });

  it("refuses an agent whose token check outlasted the open timeout: the session it would take is over, nothing is left running", async () => {
    const { node, dep } = await runningDeployment();
    const nodes = h.deps.repos.nodes;
    const lookup = nodes.byAgentTokenHash.bind(nodes);
    // The node's token is being checked (a slow database) when the tenant's wait runs out.
    let checked!: () => void;
    const checking = new Promise<void>((r) => (checked = r));
    nodes.byAgentTokenHash = async (hash) => {
      checked();
      await new Promise((r) => setTimeout(r, 1_500));
      return lookup(hash);
    };
    try {
      const c = openExec(h.url, dep.id, tenant.token);
      await c.opened;
      c.ws.send(JSON.stringify({ type: "start", command: ["sh"], tty: false }));
      const ask = await node.agent.next("open_exec");
      const agent = dialAgentExec(h.url, ask.execId, node.agentToken);
      const answer = new Promise<number>((resolve) => {
        agent.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
        agent.once("open", () => resolve(101));
      });
      await checking;
      expect(await c.got.closed).toBe(EXEC_CLOSE_CODES.FAILED);
      expect(c.got.texts).toMatchObject([{ type: "error", code: "NODE_UNREACHABLE" }]);
      // Taken, this connection would have run the command with nobody at the other end, for good.
      expect(await answer).toBe(403);
    } finally {
      nodes.byAgentTokenHash = lookup;
    }
  });

  it("refuses one session more than a deployment may hold open, with RATE_LIMITED before the upgrade, and takes one again once a session ends", async () => {
    const { dep } = await runningDeployment();
    const open = [];
    for (let i = 0; i < EXEC_MAX_SESSIONS_PER_DEPLOYMENT; i++) {
      const c = openExec(h.url, dep.id, tenant.token);
      await c.opened;
      open.push(c);
    }
    const refused = new WebSocket(`${h.url.replace(/^http/, "ws")}/deployments/${dep.id}/exec`, [EXEC_SUBPROTOCOL], {
      headers: { authorization: `Bearer ${tenant.token}` },
    });
    const answer = await new Promise<{ status: number; retryAfter: string | undefined; body: string }>((resolve) =>
      refused.once("unexpected-response", (_req, res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers["retry-after"] as string | undefined, body }));
      }),
    );
    expect(answer.status).toBe(429);
    expect(answer.retryAfter).toBe("5");
    expect(JSON.parse(answer.body).error).toMatchObject({ code: "RATE_LIMITED", details: { limit: EXEC_MAX_SESSIONS_PER_DEPLOYMENT } });

    open[0]!.ws.close();
    await open[0]!.got.closed;
    const again = openExec(h.url, dep.id, tenant.token);
    await again.opened;
    for (const c of [again, ...open.slice(1)]) c.ws.close();
  });
});

describe("exec when the control plane shuts down", () => {
  it("tells the tenant the session ended (SESSION_ENDED, 4500) and closes the agent's connection", async () => {
    const h = await startAgentHarness(db, { TUNNEL_OPEN_TIMEOUT_MS: 1_000 });
    const op = await h.signIn();
    const tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 100_000);
    const node = await h.connectedNode(op.token);
    const dep = await h.deploy(tenant.token, node.id, node.agent);
    await h.run(node.agent, dep.spec, tenant.token);
    const c = openExec(h.url, dep.id, tenant.token);
    await c.opened;
    c.ws.send(JSON.stringify({ type: "start", command: ["sh"], tty: true }));
    const ask = await node.agent.next("open_exec");
    const agent = dialAgentExec(h.url, ask.execId, node.agentToken);
    await new Promise((r) => agent.once("open", r));
    const agentClosed = new Promise<number>((r) => agent.once("close", r));
    await h.close();
    expect(await c.got.closed).toBe(EXEC_CLOSE_CODES.FAILED);
    expect(c.got.texts).toEqual([{ type: "error", code: "SESSION_ENDED", message: "the control plane is shutting down" }]);
    await agentClosed;
  });
});
