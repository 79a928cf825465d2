import http from "node:http";
import type net from "node:net";
import { AGENT_EXEC_PATH, AGENT_TUNNEL_PATH, AGENT_TUNNEL_UPGRADE, EXEC_CHANNEL, EXEC_SUBPROTOCOL } from "@cm/protocol";
import { needs } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { WebSocket } from "ws";
import type { AgentHarness } from "../agents/support/agent-harness";
import { eventually } from "../agents/support/agent-harness";
import { type ReplicaPair, startReplicaPair } from "./support/pair";

/** What an agent does once asked for a tunnel: upgrade a connection of its own to `base`. */
function answerTunnel(base: string, tunnelId: string, token: string) {
  return new Promise<net.Socket>((resolve, reject) => {
    const req = http.request(`${base}${AGENT_TUNNEL_PATH}?id=${tunnelId}`, {
      headers: { authorization: `Bearer ${token}`, connection: "Upgrade", upgrade: AGENT_TUNNEL_UPGRADE },
    });
    req.on("upgrade", (_res, socket: net.Socket) => resolve(socket));
    req.on("response", (res) => reject(new Error(`tunnel answer refused: ${res.statusCode}`)));
    req.on("error", reject);
    req.end();
  });
}

/** A container's tiny HTTP server on the agent's side of a tunnel: one response per request, saying what it was asked. */
function serveOver(socket: net.Socket) {
  let buf = "";
  socket.on("data", (c: Buffer) => {
    buf += c.toString();
    for (let end = buf.indexOf("\r\n\r\n"); end >= 0; end = buf.indexOf("\r\n\r\n")) {
      const line = buf.slice(0, buf.indexOf("\r\n"));
      buf = buf.slice(end + 4);
      const body = `container saw: ${line}`;
      socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    }
  });
}

/** A visitor's GET of an endpoint (by its Host) through the control plane at `base`. */
function visit(base: string, host: string, path: string) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port: new URL(base).port, path, headers: { host } }, (res) => {
      let body = "";
      res.on("data", (c) => {
        body += c;
      });
      res.on("end", () => resolve({ status: res.statusCode!, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

// Issue 41: a visitor of a public endpoint, or a tenant's TCP connection,
// reaches replica B while the node's agent holds its session on replica A:
// B carries it to A (one hop), and the container answers as if B held it.
needs("postgres").describe("requests carried to the replica that holds the agent's session", () => {
  let a: AgentHarness;
  let b: AgentHarness;
  let pair: ReplicaPair;

  beforeAll(async () => {
    pair = await startReplicaPair({ hops: true, a: { TUNNEL_OPEN_TIMEOUT_MS: 3_000 }, b: { TUNNEL_OPEN_TIMEOUT_MS: 3_000 } });
    ({ a, b } = pair);
  });
  afterAll(() => pair?.close());

  it("answers a public endpoint on B from the container whose agent is on A", async () => {
    const op = await a.signIn();
    const tenant = await b.signIn();
    await b.grantCredits(tenant.user.id, 1000);
    const node = await a.connectedNode(op.token);
    await eventually(async () => expect((await b.deps.repos.agentSessions.holder(node.id))?.address).toBe(a.url));

    const r = await b.call("POST", "/deployments", { token: tenant.token, body: { nodeId: node.id, customImage: "busybox:1.36", ports: [8080] } });
    expect(r.status).toBe(201);
    const id = r.json.deployment.id as string;
    const cmd = await node.agent.command(id, "create");
    for (const s of ["pulling", "starting", "running"]) node.agent.report(cmd.deployment, s);
    await eventually(async () => expect((await b.getDeployment(id, tenant.token)).status).toBe("running"));
    const key = (await b.deps.repos.deployments.get(id))!.endpointKey;

    // The agent answers A's request for a tunnel, as a real one does.
    void node.agent
      .next("open_tunnel", () => true, 5000)
      .then(async (ask) => {
        expect(ask).toMatchObject({ deploymentId: id, port: 8080 });
        serveOver(await answerTunnel(a.url, ask.tunnelId, node.agentToken));
      });
    const res = await visit(b.url, `${key}-8080.localhost`, "/hello");
    expect(res).toEqual({ status: 200, body: "container saw: GET /hello HTTP/1.1" });
    await node.agent.close();
  });

  it("opens a tenant's shell on B through A, whose agent runs it; the deployment's session cap counts both replicas' shells", async () => {
    const op = await a.signIn();
    const tenant = await b.signIn();
    await b.grantCredits(tenant.user.id, 1000);
    const node = await a.connectedNode(op.token);
    const r = await b.call("POST", "/deployments", { token: tenant.token, body: { nodeId: node.id, customImage: "busybox:1.36" } });
    const id = r.json.deployment.id as string;
    const cmd = await node.agent.command(id, "create");
    for (const s of ["pulling", "starting", "running"]) node.agent.report(cmd.deployment, s);
    await eventually(async () => expect((await b.getDeployment(id, tenant.token)).status).toBe("running"));

    const shell = new WebSocket(`${b.url.replace(/^http/, "ws")}/deployments/${id}/exec`, [EXEC_SUBPROTOCOL], {
      headers: { authorization: `Bearer ${tenant.token}` },
    });
    await new Promise((resolve, reject) => {
      shell.once("open", resolve);
      shell.once("error", reject);
    });
    shell.send(JSON.stringify({ type: "start", command: ["sh"], tty: true }));
    const ask = await node.agent.next("open_exec", (f) => f.deploymentId === id);
    // The agent dials back to the replica that holds its session, as a real one does.
    const agentSide = new WebSocket(`${a.url.replace(/^http/, "ws")}${AGENT_EXEC_PATH}?id=${ask.execId}`, {
      headers: { authorization: `Bearer ${node.agentToken}` },
    });
    const atAgent: Buffer[] = [];
    agentSide.on("message", (m) => atAgent.push(m as Buffer));
    await new Promise((resolve) => agentSide.once("open", resolve));
    const typed = Buffer.concat([Buffer.from([EXEC_CHANNEL.stdin]), Buffer.from("echo hi\n")]);
    shell.send(typed);
    await expect.poll(() => atAgent.some((m) => m.equals(typed))).toBe(true);
    // Counted where the shell runs: A knows of the shell opened through B.
    expect(a.deps.execs.sessionsOf(id)).toBe(1);
    expect(b.deps.execs.sessionsOf(id)).toBe(0);
    shell.close();
    agentSide.close();
    await node.agent.close();
  });

  it("says the node is unreachable on B, not a hang, once no replica holds its session", async () => {
    const op = await a.signIn();
    const tenant = await b.signIn();
    await b.grantCredits(tenant.user.id, 1000);
    const node = await a.connectedNode(op.token);
    const r = await b.call("POST", "/deployments", { token: tenant.token, body: { nodeId: node.id, customImage: "busybox:1.36", ports: [8080] } });
    const id = r.json.deployment.id as string;
    const cmd = await node.agent.command(id, "create");
    for (const s of ["pulling", "starting", "running"]) node.agent.report(cmd.deployment, s);
    await eventually(async () => expect((await b.getDeployment(id, tenant.token)).status).toBe("running"));
    const key = (await b.deps.repos.deployments.get(id))!.endpointKey;
    await node.agent.close();
    await eventually(async () => expect(await b.deps.repos.agentSessions.holder(node.id)).toBeUndefined());
    await new Promise((resolve) => setTimeout(resolve, 1100)); // B's memory of the holder (1 s)
    const res = await visit(b.url, `${key}-8080.localhost`, "/");
    expect(res.status).toBe(503);
    expect(res.body).toMatch(/node/i);
  });
});
