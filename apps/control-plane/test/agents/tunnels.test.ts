// The control plane's half of a tunnel: it asks the node's agent over the
// control connection, and takes the agent's own connection back on
// /agent/tunnel: raw bytes after an `Upgrade: cm-tunnel`, or WebSocket
// messages from agents before 0.2. Only the node that was asked may answer.
import http from "node:http";
import type net from "node:net";
import type { Duplex } from "node:stream";
import { AGENT_TUNNEL_PATH, AGENT_TUNNEL_UPGRADE } from "@cm/protocol";
import { sqliteDatabase as db } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { type AgentHarness, startAgentHarness } from "./support/agent-harness";

/** What an agent does once asked: upgrade a connection of its own to a raw tunnel. */
function answerRaw(base: string, tunnelId: string, token: string) {
  return new Promise<{ status: number; socket?: net.Socket }>((resolve, reject) => {
    const req = http.request(`${base}${AGENT_TUNNEL_PATH}?id=${tunnelId}`, {
      headers: { authorization: `Bearer ${token}`, connection: "Upgrade", upgrade: AGENT_TUNNEL_UPGRADE },
    });
    req.on("upgrade", (res, socket: net.Socket) => resolve({ status: res.statusCode!, socket }));
    req.on("response", (res) => (res.resume(), resolve({ status: res.statusCode! })));
    req.on("error", reject);
    req.end();
  });
}

const read = (s: Duplex | net.Socket, bytes: number) =>
  new Promise<string>((resolve) => {
    let got = "";
    const on = (c: Buffer) => {
      got += c.toString();
      if (got.length >= bytes) s.off("data", on), resolve(got);
    };
    s.on("data", on);
  });

describe("tunnels", () => {
  let h: AgentHarness;
  let op: Awaited<ReturnType<AgentHarness["signIn"]>>;
  beforeAll(async () => {
    h = await startAgentHarness(db, { TUNNEL_OPEN_TIMEOUT_MS: 1_000 });
    op = await h.signIn();
  });
  afterAll(() => h.close());

  it("carries bytes both ways over the agent's upgraded connection, unframed", async () => {
    const node = await h.connectedNode(op.token);
    const dialed = h.deps.tunnels.dial({ deploymentId: "dep_a", nodeId: node.id, port: 8080 });
    const ask = await node.agent.next("open_tunnel");
    expect(ask).toMatchObject({ deploymentId: "dep_a", port: 8080 });
    const answer = await answerRaw(h.url, ask.tunnelId, node.agentToken);
    expect(answer.status).toBe(101);
    const gatewaySide = await dialed;

    gatewaySide.write("GET / HTTP/1.1\r\n\r\n");
    expect(await read(answer.socket!, 18)).toBe("GET / HTTP/1.1\r\n\r\n");
    answer.socket!.write("HTTP/1.1 204 No Content\r\n\r\n");
    expect(await read(gatewaySide, 27)).toBe("HTTP/1.1 204 No Content\r\n\r\n");
    // The agent hanging up (the container closed) closes the gateway's side.
    const closed = new Promise((r) => gatewaySide.once("close", r));
    answer.socket!.end();
    await closed;
  });

  it("still takes a WebSocket tunnel from an agent before 0.2", async () => {
    const node = await h.connectedNode(op.token);
    const dialed = h.deps.tunnels.dial({ deploymentId: "dep_b", nodeId: node.id, port: 8080 });
    const ask = await node.agent.next("open_tunnel");
    const ws = new WebSocket(`${h.url.replace(/^http/, "ws")}${AGENT_TUNNEL_PATH}?id=${ask.tunnelId}`, {
      headers: { authorization: `Bearer ${node.agentToken}` },
    });
    const gatewaySide = await dialed;
    const received = new Promise<string>((r) => ws.once("message", (m) => r(m.toString())));
    gatewaySide.write("ping");
    expect(await received).toBe("ping");
    ws.send(Buffer.from("pong"));
    expect(await read(gatewaySide, 4)).toBe("pong");
    ws.close();
  });

  it("refuses a tunnel from another node's agent, or for an id nobody asked for", async () => {
    const asked = await h.connectedNode(op.token);
    const other = await h.connectedNode(op.token);
    const dialed = h.deps.tunnels.dial({ deploymentId: "dep_c", nodeId: asked.id, port: 8080 }).catch((e: Error) => e);
    const ask = await asked.agent.next("open_tunnel");
    expect((await answerRaw(h.url, ask.tunnelId, other.agentToken)).status).toBe(403);
    expect((await answerRaw(h.url, "0123456789abcdef", asked.agentToken)).status).toBe(403);
    // Nobody rightful answered: the dial ends within the open timeout, saying why.
    expect(await dialed).toMatchObject({ kind: "node_unreachable", message: "the node did not open a tunnel within 1 s" });
  });
});
