import fs from "node:fs";
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import type { AddressInfo, Socket } from "node:net";
import type { Duplex } from "node:stream";
import { AGENT_EXEC_PATH, AGENT_TUNNEL_PATH, AGENT_WS_PATH } from "@cm/protocol";
import { getRequestListener } from "@hono/node-server";
import { HOP_HEADER, REPLICA_TUNNEL_PATH } from "./agents/replica-hop";
import { createApp } from "./app";
import type { Deps } from "./deps";
import { answerClientError } from "./http/client-error";
import { lingerWhenClosed } from "./http/lingering-close";
import { hasManyHosts, refuseManyHosts } from "./http/one-host";
import { EXEC_PATH, execUpgrade } from "./routes/exec";
import { TCP_PATH } from "./routes/tcp";
import { hashSecret } from "./services/ids";

export type RunningServer = { url: string; port: number; server: http.Server; close(): Promise<void> };

/** Binds the app (port 0 picks a free one, as the tests do) and answers how to reach and stop it. */
export async function startServer(deps: Deps, opts: { port: number; host: string }): Promise<RunningServer> {
  const { app } = createApp(deps);
  const api = getRequestListener(app.fetch);
  // Requests for a public endpoint's host go to the tenant's container; the rest is the API.
  const listener: http.RequestListener = (req, res) => {
    // A close Node decides on while this request's body is still coming reads it to its end first (within bounds).
    lingerWhenClosed(req.socket, () => !req.complete);
    if (hasManyHosts(req)) return refuseManyHosts(res);
    if (deps.endpoints.owns(req.headers.host)) return void deps.endpoints.handleRequest(req, res);
    void api(req, res);
  };
  const tls =
    deps.config.TLS_CERT && deps.config.TLS_KEY ? { cert: fs.readFileSync(deps.config.TLS_CERT), key: fs.readFileSync(deps.config.TLS_KEY) } : undefined;
  const server: http.Server = tls ? https.createServer(tls, listener) : http.createServer(listener);
  // Long uploads and streams are bounded by the gateway's own idle timeout instead.
  server.requestTimeout = 0;
  // A URL or headers past Node's limit: answered in the one error shape, not an empty 431.
  server.on("clientError", answerClientError());
  deps.endpoints.intercept(server);
  // Every connection, whoever holds it now (the HTTP server, the gateway's relay,
  // an upgraded WebSocket or tunnel): closing must not wait on one nobody closed.
  const sockets = new Set<Socket>();
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const upgrades = upgradeRoutes(deps, app.fetch);
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => socket.destroy()); // a peer gone mid-handshake must not take the process down
    if (hasManyHosts(req)) return refuseManyHosts(socket);
    const route = upgrades.find((r) => r.matches(req));
    if (route) return route.handle(req, socket, head);
    socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
  });
  const port = (server.address() as AddressInfo).port;
  deps.setListenPort(port);
  const host = opts.host.includes(":") ? `[${opts.host}]` : opts.host;
  return {
    url: `${tls ? "https" : "http"}://${host}:${port}`,
    port,
    server,
    // Upgraded sockets keep the listener from closing: the agents' are closed first.
    close: () =>
      deps.agents.close().then(
        () =>
          new Promise<void>((resolve) => {
            deps.tunnels.close();
            deps.execs.close();
            deps.tcp.close();
            server.close(() => resolve());
            (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
            for (const s of sockets) s.destroy();
          }),
      ),
  };
}

type UpgradeRoute = { matches(req: IncomingMessage): boolean; handle(req: IncomingMessage, socket: Duplex, head: Buffer): void };

/**
 * Who takes a WebSocket upgrade, first match wins. Routes that match on Host
 * (a tenant's public endpoint, which may use any path) belong before the agent
 * route, which matches on the path alone.
 */
function upgradeRoutes(deps: Deps, fetch: Parameters<typeof execUpgrade>[0]): UpgradeRoute[] {
  const pathOf = (req: IncomingMessage) => (req.url ?? "/").split("?", 1)[0];
  return [
    { matches: (req) => deps.endpoints.owns(req.headers.host), handle: deps.endpoints.handleUpgrade },
    { matches: (req) => pathOf(req) === AGENT_WS_PATH, handle: deps.agents.handleUpgrade },
    { matches: (req) => pathOf(req) === AGENT_TUNNEL_PATH, handle: carriedToHolder(deps, agentNode(deps), deps.tunnels.handleUpgrade) },
    { matches: (req) => pathOf(req) === AGENT_EXEC_PATH, handle: carriedToHolder(deps, agentNode(deps), deps.execs.handleAgentUpgrade) },
    // A tenant's shell: the app checks who asks before the connection is taken.
    {
      matches: (req) => req.method === "GET" && EXEC_PATH.test(pathOf(req) ?? ""),
      handle: carriedToHolder(deps, deploymentNode(deps), execUpgrade(fetch, deps.execs)),
    },
    // A tenant's TCP connection (cm port-forward): the same, and the app dials the container before the upgrade.
    {
      matches: (req) => req.method === "GET" && TCP_PATH.test(pathOf(req) ?? ""),
      handle: carriedToHolder(deps, deploymentNode(deps), execUpgrade(fetch, deps.tcp)),
    },
    // Another replica's tunnel to an agent whose session this one holds.
    ...(deps.hop?.enabled ? [{ matches: (req: IncomingMessage) => pathOf(req) === REPLICA_TUNNEL_PATH, handle: deps.hop.handleTunnel }] : []),
  ];
}

/**
 * An upgrade that needs the session of a node whose agent is held by another
 * replica is replayed there (replica-hop.ts), which takes it as its own: a
 * tenant's shell or TCP connection (that replica's API checks who asks, and
 * counts the deployment's sessions for the whole fleet), or an agent's
 * connection back for a tunnel or a shell that a load balancer sent here
 * rather than to the replica that asked for it. `nodeOf` says which node the
 * request needs, read only to route it. One hop at most: a replayed request is
 * handled where it lands.
 */
function carriedToHolder(deps: Deps, nodeOf: (req: IncomingMessage) => Promise<string | undefined>, handle: UpgradeRoute["handle"]): UpgradeRoute["handle"] {
  const hop = deps.hop;
  if (!hop?.enabled) return handle;
  return (req, socket, head) => {
    void (async () => {
      if (req.headers[HOP_HEADER] === undefined) {
        const nodeId = await nodeOf(req).catch(() => undefined);
        const address = nodeId && !deps.agents.isConnected(nodeId) ? await hop.holderOf(nodeId) : undefined;
        if (address) return hop.forwardUpgrade(address, req, socket, head);
      }
      handle(req, socket, head);
    })().catch(() => socket.destroy());
  };
}

/** The node of the deployment a tenant's upgrade names (`/deployments/{id}/...`); the account is checked where it lands. */
const deploymentNode = (deps: Deps) => async (req: IncomingMessage) => {
  const id = /^\/deployments\/([^/]+)\//.exec(req.url ?? "")?.[1];
  return id ? (await deps.repos.deployments.get(decodeURIComponent(id)))?.nodeId : undefined;
};

/** The node whose agent token an agent's upgrade bears. */
const agentNode = (deps: Deps) => async (req: IncomingMessage) => {
  const token = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? "")?.[1];
  return token ? (await deps.repos.nodes.byAgentTokenHash(hashSecret(token)))?.id : undefined;
};
