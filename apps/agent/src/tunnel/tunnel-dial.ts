import http from "node:http";
import https from "node:https";
import type net from "node:net";
import { AGENT_TUNNEL_UPGRADE } from "@cm/protocol";

/**
 * A tunnel's own connection to the control plane (`/agent/tunnel?id=`, with
 * the agent's token), upgraded to raw bytes: what an endpoint's connection and
 * a container's archive each travel on.
 */
export function dialTunnel(tunnelUrl: string, token: string, tunnelId: string, connectTimeoutMs = 5_000): Promise<net.Socket> {
  const url = `${tunnelUrl}?id=${encodeURIComponent(tunnelId)}`;
  const request = (url.startsWith("https:") ? https : http).request(url, {
    agent: false,
    headers: { authorization: `Bearer ${token}`, connection: "Upgrade", upgrade: AGENT_TUNNEL_UPGRADE },
  });
  return new Promise<net.Socket>((resolve, reject) => {
    request.setTimeout(connectTimeoutMs, () => request.destroy(new Error("the control plane did not answer")));
    request.once("upgrade", (_res, socket: net.Socket, head: Buffer) => {
      socket.setTimeout(0);
      socket.setNoDelay(true);
      if (head.length) socket.unshift(head);
      resolve(socket);
    });
    request.once("response", (res) => {
      res.resume();
      reject(new Error(`the control plane refused the tunnel (${res.statusCode})`));
    });
    request.once("error", reject);
    request.end();
  });
}
