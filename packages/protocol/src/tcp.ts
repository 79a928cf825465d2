/**
 * A raw TCP connection to a deployment's container (`cm port-forward`, `cm ssh`):
 * `GET /deployments/{id}/tcp/{port}` upgraded to a WebSocket whose binary
 * messages are the connection's bytes, both ways. The control plane carries
 * them to the container through its node's agent (the tunnel the public
 * endpoints use), so the node needs no inbound port. Text messages from the
 * client are `renew` (ExecRenew) only, as on an exec session.
 */

/** The subprotocol a client asks for, and the server answers with. The token may come as `bearer.<token>` beside it (EXEC_BEARER_PROTOCOL_PREFIX). */
export const TCP_SUBPROTOCOL = "cm.tcp.v1";

/** Raw TCP ports one deployment may declare (its `tcpPorts`). */
export const TCP_MAX_PORTS = 8;

/**
 * TCP connections one deployment may have open through the control plane at
 * once: each holds two sockets here, a tunnel and a connection on the node's
 * agent that every tenant of the node shares. The next is refused with
 * RATE_LIMITED before the upgrade.
 */
export const TCP_MAX_CONNECTIONS_PER_DEPLOYMENT = 16;

/** The largest message either side reads; bytes are sent in smaller pieces. */
export const TCP_MAX_MESSAGE_BYTES = 256 * 1024;

export const TCP_CLOSE_CODES = {
  /** The container's side closed the connection. */
  NORMAL: 1000,
  /** A text message that is not a `renew`. */
  BAD_MESSAGE: 4400,
  /** The sign-in that opened the connection is over (signed out, or its access token expired without a `renew`). */
  UNAUTHORIZED: 4401,
  /** No byte either way for the control plane's idle timeout. */
  IDLE: 4408,
  /** The deployment stopped, the node went away, or the control plane is shutting down. */
  ENDED: 4500,
} as const;
