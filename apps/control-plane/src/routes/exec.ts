import type { IncomingMessage } from "node:http";
import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import {
  EXEC_BEARER_PROTOCOL_PREFIX,
  EXEC_CHANNEL,
  EXEC_CLOSE_CODES,
  EXEC_MAX_MESSAGE_BYTES,
  EXEC_MAX_SESSIONS_PER_DEPLOYMENT,
  EXEC_START_TIMEOUT_MS,
  EXEC_SUBPROTOCOL,
  ExecClientControl,
  ExecRenew,
  ExecServerControl,
  ExecStart,
} from "@cm/protocol";
import type { Context } from "hono";
import { z } from "zod";
import type { ExecTarget } from "../agents/exec-broker";
import type { Deps } from "../deps";
import { ApiError } from "../errors";
import type { AppEnv } from "../http/env";
import { createRouter, IdParams, REQUEST_ID_HEADER, type RouteFactory } from "../http/route";

/** The path the upgrade listener hands to the app: /deployments/{id}/exec. */
export const EXEC_PATH = /^\/deployments\/[^/]+\/exec$/;

/** What the upgrade listener passes the app as its env, so that the route can take the connection (exec's, tcp's). */
export type UpgradeEnv<T> = { incoming: IncomingMessage; upgrade(target: T): void };
export const upgradeOf = <T = ExecTarget>(c: Context<AppEnv>) => (c.env as Partial<UpgradeEnv<T>> | undefined)?.upgrade;

/** The route's description, with this installation's timeouts. */
const protocolDoc = (config: Deps["config"]) =>
  [
    `Opened as a WebSocket (\`Upgrade: websocket\`) with the subprotocol \`${EXEC_SUBPROTOCOL}\`. The bearer token goes in the Authorization header as for every route; a browser, which cannot set headers on a WebSocket, names it as a second subprotocol instead: \`Sec-WebSocket-Protocol: ${EXEC_SUBPROTOCOL}, ${EXEC_BEARER_PROTOCOL_PREFIX}<access token>\` (never echoed back).`,
    `Refusals come before the upgrade as plain HTTP in the one error shape: another account's deployment is DEPLOYMENT_NOT_FOUND, one that is not running INVALID_STATE_TRANSITION (details.currentStatus), a node that is not connected NODE_OFFLINE, a deployment with ${EXEC_MAX_SESSIONS_PER_DEPLOYMENT} sessions open already RATE_LIMITED (429, Retry-After). The same request without \`Upgrade\` answers those, or UPGRADE_REQUIRED when all is well: a browser learns that way why its WebSocket was refused.`,
    `Messages: the client's first, within ${EXEC_START_TIMEOUT_MS / 1000} s, is JSON text \`${JSON.stringify(z.toJSONSchema(ExecStart))}\`. Bytes travel as binary messages whose first byte is the channel (${EXEC_CHANNEL.stdin} stdin from the client; ${EXEC_CHANNEL.stdout} stdout, ${EXEC_CHANNEL.stderr} stderr from the server; a tty sends everything as stdout). Control messages are JSON text: from the client ${JSON.stringify(z.toJSONSchema(ExecClientControl))}; from the server ${JSON.stringify(z.toJSONSchema(ExecServerControl))}.`,
    `The session lasts as long as the sign-in that opened it: signing out (POST /auth/logout) or a revocation of the token's family as stolen (a refresh token used twice) ends it with \`error\` UNAUTHORIZED and close code ${EXEC_CLOSE_CODES.UNAUTHORIZED} (at once on the replica that revoked it, within ${config.REVOCATION_CHECK_MS / 1000} s on another: REVOCATION_CHECK_MS), and so does the expiry of the access token it was opened with (TOKEN_EXPIRED), unless the client sent a fresh access token of the same account first: \`${JSON.stringify(z.toJSONSchema(ExecRenew))}\`, which the control plane keeps (it never reaches the node) and which moves the end to that token's expiry; the SDK sends one each time it refreshes. A session with no input and no output for ${config.EXEC_IDLE_TIMEOUT_MS / 1000} s (EXEC_IDLE_TIMEOUT_MS) ends with \`error\` IDLE_TIMEOUT and close code ${EXEC_CLOSE_CODES.IDLE}.`,
    `The session ends with \`exit\` and close code ${EXEC_CLOSE_CODES.NORMAL}, or \`error\` and ${EXEC_CLOSE_CODES.FAILED} (the node could not be reached, the container is gone, the deployment stopped), or ${EXEC_CLOSE_CODES.BAD_MESSAGE} after a message that breaks these rules. Messages are at most ${EXEC_MAX_MESSAGE_BYTES / 1024} KiB. Closing the connection hangs up on the command: SIGHUP to it and its process group, as a closing terminal does; without a tty, whatever still runs 2 s later is killed (SIGKILL), so nothing outlives its session unseen.`,
  ].join("\n\n");

/** `GET /deployments/{id}/exec`: a command in the deployment's container, over a WebSocket. Mounted at /deployments. */
export function execRoutes(deps: Deps, route: RouteFactory) {
  return createRouter().openapi(
    route(
      {
        method: "get",
        path: "/{id}/exec",
        operationId: "execInDeployment",
        tags: ["deployments"],
        summary: "Run a command in a running deployment's container (WebSocket)",
        description: protocolDoc(deps.config),
        request: { params: IdParams },
        responses: {
          101: {
            description: `Switching Protocols: the connection is a WebSocket speaking ${EXEC_SUBPROTOCOL}`,
            headers: { ...REQUEST_ID_HEADER, "Sec-WebSocket-Protocol": { description: EXEC_SUBPROTOCOL, schema: { type: "string" as const } } },
          },
        },
      },
      { auth: true, errors: ["DEPLOYMENT_NOT_FOUND", "INVALID_STATE_TRANSITION", "NODE_OFFLINE", "RATE_LIMITED", "UPGRADE_REQUIRED"] },
    ),
    async (c) => {
      const dep = await deps.deployments.mine(c.req.valid("param").id, c.get("user").id);
      requireReachable(deps, dep, {
        action: "exec",
        doing: "exec in",
        open: deps.execs.sessionsOf(dep.id),
        max: EXEC_MAX_SESSIONS_PER_DEPLOYMENT,
        what: "exec sessions",
        free: "end one first",
      });
      const upgrade = upgradeOf(c);
      if (!upgrade) throw new ApiError("UPGRADE_REQUIRED");
      upgrade({ deploymentId: dep.id, nodeId: dep.nodeId, log: c.get("log"), requestId: c.get("requestId"), grant: c.get("grant") });
      // Never written: the connection is the WebSocket's now.
      return c.body(null, 200);
    },
  );
}

/**
 * The upgrade listener for /deployments/{id}/exec (and /tcp/{port}): runs the
 * request through the app (auth, the database gate, the route's checks, the
 * request id), so a refusal is the API's own answer, written to the socket as
 * plain HTTP; the route takes the connection when all is well.
 */
export function execUpgrade<T = ExecTarget>(
  fetch: (req: Request, env: UpgradeEnv<T>) => Response | Promise<Response>,
  broker: { acceptClient(req: IncomingMessage, socket: Duplex, head: Buffer, target: T): void },
) {
  return (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(", ") : v);
    const token = bearerFromProtocols(headers.get("sec-websocket-protocol"));
    if (!headers.has("authorization") && token) headers.set("authorization", `Bearer ${token}`);
    let taken = false;
    const env: UpgradeEnv<T> = {
      incoming: req,
      upgrade: (target) => {
        taken = true;
        broker.acceptClient(req, socket, head, target);
      },
    };
    void Promise.resolve()
      .then(() => fetch(new Request(`http://${req.headers.host ?? "localhost"}${req.url ?? "/"}`, { method: req.method ?? "GET", headers }), env))
      .then(async (res) => {
        if (taken) return;
        const body = Buffer.from(await res.arrayBuffer());
        const lines = [`HTTP/1.1 ${res.status} ${STATUS_CODES[res.status] ?? ""}`];
        res.headers.forEach((value, key) => {
          if (key !== "content-length" && key !== "connection" && key !== "transfer-encoding") lines.push(`${key}: ${value}`);
        });
        lines.push(`content-length: ${body.length}`, "connection: close", "", "");
        socket.end(Buffer.concat([Buffer.from(lines.join("\r\n")), body]));
      })
      .catch(() => socket.destroy());
  };
}

/** The token of a `bearer.<token>` subprotocol, if the client named one. */
/**
 * What a WebSocket into a deployment (exec, a TCP port) needs, each refusal as its route
 * documents it: the deployment running, its node's agent connected, and fewer than `max`
 * of these connections open on it.
 */
export function requireReachable(
  deps: Deps,
  dep: { id: string; status: string; nodeId: string },
  o: { action: string; doing: string; open: number; max: number; what: string; free: string },
): void {
  if (dep.status !== "running")
    throw new ApiError("INVALID_STATE_TRANSITION", `cannot ${o.doing} a deployment that is ${dep.status}: it must be running`, {
      currentStatus: dep.status,
      action: o.action,
    });
  if (!deps.agents.isConnected(dep.nodeId)) throw new ApiError("NODE_OFFLINE", `node ${dep.nodeId} is not connected; try again once it is back`);
  if (o.open >= o.max)
    throw new ApiError(
      "RATE_LIMITED",
      `deployment ${dep.id} has ${o.max} ${o.what} open, the most it may: ${o.free}`,
      { limit: o.max, retryAfterSeconds: 5 },
      { "Retry-After": "5" },
    );
}

export function bearerFromProtocols(header: string | null): string | undefined {
  const named = (header ?? "").split(",").map((p) => p.trim());
  const bearer = named.find((p) => p.startsWith(EXEC_BEARER_PROTOCOL_PREFIX));
  return bearer ? bearer.slice(EXEC_BEARER_PROTOCOL_PREFIX.length) || undefined : undefined;
}
