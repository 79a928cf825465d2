// What the gateway needs from the rest of the control plane, and the words its
// pieces share: the proxy and the raw relay both import these, never each other.
import type { Duplex } from "node:stream";

/** Requests the gateway sends again on a fresh tunnel when the first one closed before answering. */
export const RETRIABLE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

export type EndpointTarget = { deploymentId: string; nodeId: string; port: number };

export type Resolution = { kind: "ok"; target: EndpointTarget } | { kind: "unknown_host" } | { kind: "not_running" } | { kind: "node_unreachable" };

/** Finds what an endpoint label points at right now. */
export interface EndpointResolver {
  resolve(label: string): Promise<Resolution>;
}

/** Thrown by a dialer: the node is not connected, nothing listens on the port, or the deployment stopped while its tunnel opened. */
export class DialError extends Error {
  constructor(
    readonly kind: "node_unreachable" | "port_not_ready" | "not_running",
    message: string,
  ) {
    super(message);
  }
}

/** Opens a byte stream to a container's port, through whatever reaches its node. */
export interface TunnelDialer {
  dial(target: EndpointTarget): Promise<Duplex>;
}

export type GatewayTimeouts = {
  /** From the request to the first byte of the container's response. */
  responseMs: number;
  /** No byte either way for this long ends a request or a WebSocket. */
  idleMs: number;
  /** A client connection with no request outstanding is closed after this long (Node's HTTP server default: 5 s). */
  keepAliveMs?: number;
  /** A request head must arrive whole within this long of its first byte (Node's headersTimeout: 60 s). */
  headersMs?: number;
};
