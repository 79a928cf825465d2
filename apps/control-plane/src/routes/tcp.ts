import {
  EXEC_BEARER_PROTOCOL_PREFIX,
  ExecRenew,
  queryInteger,
  TCP_CLOSE_CODES,
  TCP_MAX_CONNECTIONS_PER_DEPLOYMENT,
  TCP_MAX_MESSAGE_BYTES,
  TCP_MAX_PORTS,
  TCP_SUBPROTOCOL,
} from "@cm/protocol";
import { z } from "zod";
import type { TcpTarget } from "../agents/tcp-forwarder";
import type { Deps } from "../deps";
import { ApiError } from "../errors";
import { DialError } from "../gateway/ports";
import { createRouter, PathParam, REQUEST_ID_HEADER, type RouteFactory } from "../http/route";
import { requireReachable, upgradeOf } from "./exec";

/** The path the upgrade listener hands to the app: /deployments/{id}/tcp/{port}. */
export const TCP_PATH = /^\/deployments\/[^/]+\/tcp\/[^/]+$/;

const TcpParams = z.object({
  id: PathParam.meta({ description: "the deployment's id" }),
  port: queryInteger(z.number().int().min(1).max(65535)).meta({ description: "one of the deployment's tcpPorts" }),
});

/** The route's description, with this installation's timeouts. */
const protocolDoc = (config: Deps["config"]) =>
  [
    `A raw TCP connection to a port of the deployment's container, for what is not HTTP (ssh, a database): \`cm port-forward ID LOCAL:REMOTE\` listens locally and opens one of these per connection; \`cm ssh ID\` uses it as ssh's ProxyCommand. The container's port is reached through its node's agent, as the public endpoints are: the node has no inbound port, and the port is never on the internet.`,
    `Opened as a WebSocket (\`Upgrade: websocket\`) with the subprotocol \`${TCP_SUBPROTOCOL}\`; the bearer token goes in the Authorization header, or (a browser) as a second subprotocol \`${EXEC_BEARER_PROTOCOL_PREFIX}<access token>\` (never echoed back).`,
    `Refusals come before the upgrade as plain HTTP in the one error shape: another account's deployment is DEPLOYMENT_NOT_FOUND, a port not in its tcpPorts (at most ${TCP_MAX_PORTS}, declared at create) TCP_PORT_NOT_DECLARED, one that is not running INVALID_STATE_TRANSITION (details.currentStatus), a node that is not connected NODE_OFFLINE, nothing listening on the port in the container TCP_PORT_NOT_LISTENING, a deployment with ${TCP_MAX_CONNECTIONS_PER_DEPLOYMENT} connections open already RATE_LIMITED (429, Retry-After). The container's port is connected to before the upgrade, so a 101 means the connection is there. The same request without \`Upgrade\` answers those, or UPGRADE_REQUIRED when all is well (without connecting).`,
    `Messages: binary messages carry the connection's bytes, both ways, at most ${TCP_MAX_MESSAGE_BYTES / 1024} KiB each. The client's only text message is \`${JSON.stringify(z.toJSONSchema(ExecRenew))}\`, as on an exec session: the connection lasts as long as the sign-in that opened it (signing out, a revoked token family or the access token's expiry without a renew end it with close code ${TCP_CLOSE_CODES.UNAUTHORIZED}, within ${config.REVOCATION_CHECK_MS / 1000} s on another replica).`,
    `It ends with close code ${TCP_CLOSE_CODES.NORMAL} when the container closes the connection, ${TCP_CLOSE_CODES.IDLE} after ${config.GATEWAY_IDLE_TIMEOUT_MS / 1000} s with no byte either way (GATEWAY_IDLE_TIMEOUT_MS, the tunnels' idle timeout: ssh's ServerAliveInterval, which cm ssh sets, keeps a quiet session open), ${TCP_CLOSE_CODES.ENDED} when the deployment stops or the control plane shuts down, ${TCP_CLOSE_CODES.BAD_MESSAGE} after a text message that is not a renew. Closing the WebSocket closes the container's connection.`,
  ].join("\n\n");

/** `GET /deployments/{id}/tcp/{port}`: a TCP connection to the deployment's container, over a WebSocket. Mounted at /deployments. */
export function tcpRoutes(deps: Deps, route: RouteFactory) {
  return createRouter().openapi(
    route(
      {
        method: "get",
        path: "/{id}/tcp/{port}",
        operationId: "connectToDeploymentTcpPort",
        tags: ["deployments"],
        summary: "Open a TCP connection to one of a running deployment's tcpPorts (WebSocket)",
        description: protocolDoc(deps.config),
        request: { params: TcpParams },
        responses: {
          101: {
            description: `Switching Protocols: the connection is a WebSocket speaking ${TCP_SUBPROTOCOL}, connected to the container's port`,
            headers: { ...REQUEST_ID_HEADER, "Sec-WebSocket-Protocol": { description: TCP_SUBPROTOCOL, schema: { type: "string" as const } } },
          },
        },
      },
      {
        auth: true,
        errors: [
          "DEPLOYMENT_NOT_FOUND",
          "TCP_PORT_NOT_DECLARED",
          "INVALID_STATE_TRANSITION",
          "NODE_OFFLINE",
          "TCP_PORT_NOT_LISTENING",
          "RATE_LIMITED",
          "UPGRADE_REQUIRED",
        ],
      },
    ),
    async (c) => {
      const { id, port } = c.req.valid("param");
      const dep = await deps.deployments.mine(id, c.get("user").id);
      if (!dep.tcpPorts.includes(port))
        throw new ApiError(
          "TCP_PORT_NOT_DECLARED",
          `deployment ${dep.id} declares no TCP port ${port}${dep.tcpPorts.length ? ` (its tcpPorts: ${dep.tcpPorts.join(", ")})` : ": it has no tcpPorts, which are set at create"}`,
          { tcpPorts: dep.tcpPorts },
        );
      requireReachable(deps, dep, {
        action: "tcp",
        doing: "connect to",
        open: deps.tcp.connectionsOf(dep.id),
        max: TCP_MAX_CONNECTIONS_PER_DEPLOYMENT,
        what: "TCP connections",
        free: "close one first",
      });
      const upgrade = upgradeOf<TcpTarget>(c);
      if (!upgrade) throw new ApiError("UPGRADE_REQUIRED");
      const slot = deps.tcp.reserve(dep.id);
      const tunnel = await deps.tunnels.dial({ nodeId: dep.nodeId, deploymentId: dep.id, port }).catch((err: unknown) => {
        slot.release();
        throw dialRefusal(err, dep.nodeId, port);
      });
      upgrade({ deploymentId: dep.id, nodeId: dep.nodeId, port, tunnel, slot, log: c.get("log"), requestId: c.get("requestId"), grant: c.get("grant") });
      // Never written: the connection is the WebSocket's now.
      return c.body(null, 200);
    },
  );
}

/** Why the container's port could not be reached, in the API's words. */
function dialRefusal(err: unknown, nodeId: string, port: number): unknown {
  if (!(err instanceof DialError)) return err;
  if (err.kind === "port_not_ready")
    return new ApiError("TCP_PORT_NOT_LISTENING", `nothing accepts connections on port ${port} in the container: ${err.message}`);
  if (err.kind === "not_running") return new ApiError("INVALID_STATE_TRANSITION", `cannot connect: ${err.message}`, { action: "tcp" });
  return new ApiError("NODE_OFFLINE", `node ${nodeId} could not be reached: ${err.message}`);
}
