import { z } from "zod";

/**
 * A command run in a deployment's container: `GET /deployments/{id}/exec`
 * upgraded to a WebSocket. The same messages travel on both legs (client <->
 * control plane and control plane <-> agent), so the control plane relays them
 * as they are after checking what the client sent.
 *
 * - Binary messages carry bytes: the first byte is the channel (EXEC_CHANNEL),
 *   the rest the data. Clients send only stdin; stdout and stderr come back
 *   apart unless a tty merges them onto stdout.
 * - Text messages are JSON control messages: the client's first message is
 *   `start`; then `resize` and `stdin_end` (passed on to the agent), and
 *   `renew` (for the control plane only). The server answers `exit` (then
 *   closes with 1000) or `error` (then closes with one of EXEC_CLOSE_CODES).
 */

/** The subprotocol a client asks for, and the server answers with. */
export const EXEC_SUBPROTOCOL = "cm.exec.v1";
/**
 * Browsers cannot set headers on a WebSocket: a client may name its access
 * token as a second subprotocol, `bearer.<token>` (as Kubernetes does), instead
 * of the Authorization header. The server never echoes it back.
 */
export const EXEC_BEARER_PROTOCOL_PREFIX = "bearer.";
/** Where an agent opens the connection that carries one exec session: `?id=<execId>`, with its token. */
export const AGENT_EXEC_PATH = "/agent/exec";

export const EXEC_CHANNEL = { stdin: 0, stdout: 1, stderr: 2 } as const;
export type ExecChannel = (typeof EXEC_CHANNEL)[keyof typeof EXEC_CHANNEL];

/** The largest message either side reads; stdin should be sent in smaller chunks. */
export const EXEC_MAX_MESSAGE_BYTES = 256 * 1024;
/**
 * Sessions one deployment may have open at once: each holds two connections and
 * a `docker exec` on a node's agent that every tenant of the node shares. The
 * next is refused with RATE_LIMITED before the upgrade.
 */
export const EXEC_MAX_SESSIONS_PER_DEPLOYMENT = 8;
/** How long a client has, after the upgrade, to send its `start`. */
export const EXEC_START_TIMEOUT_MS = 10_000;

export const EXEC_CLOSE_CODES = {
  /** The command ended; `exit` said with which code. */
  NORMAL: 1000,
  /** A message that is not one of these, or `start` missing or sent twice. */
  BAD_MESSAGE: 4400,
  /**
   * The sign-in that opened the session is over: signed out (its token family
   * revoked) or its access token expired without a `renew`. `error` says which
   * (UNAUTHORIZED or TOKEN_EXPIRED); sign in again or refresh, then reconnect.
   */
  UNAUTHORIZED: 4401,
  /** Nothing was typed and nothing was printed for the control plane's idle timeout (IDLE_TIMEOUT). */
  IDLE: 4408,
  /** The session cannot be opened or went on no longer: `error` says why. */
  FAILED: 4500,
} as const;

/** Why a session ended without an exit code (the `code` of an `error` message). */
export const EXEC_ERROR_CODES = [
  /** The client broke the protocol. */
  "BAD_MESSAGE",
  /** The node's agent is not connected, or did not open the session in time. */
  "NODE_UNREACHABLE",
  /** The agent found no running container of this deployment (or refused it). */
  "EXEC_REFUSED",
  /** The container engine could not run the command. */
  "EXEC_FAILED",
  /** The deployment stopped, or the control plane or agent is shutting down. */
  "SESSION_ENDED",
  /** The sign-in behind the session was ended: signed out, or its token family revoked as stolen (close code 4401). */
  "UNAUTHORIZED",
  /** The access token that opened (or last renewed) the session expired and no `renew` brought a fresh one (close code 4401). */
  "TOKEN_EXPIRED",
  /** The API key that opened the session expired (close code 4401). */
  "API_KEY_EXPIRED",
  /** No input and no output for the control plane's idle timeout (close code 4408). */
  "IDLE_TIMEOUT",
] as const;
export type ExecErrorCode = (typeof EXEC_ERROR_CODES)[number];

const TerminalSize = { cols: z.number().int().min(1).max(1000), rows: z.number().int().min(1).max(1000) };

/** At most 256 words of 4 KiB each, 64 KiB in all: a command line, not a payload (send data on stdin). */
export const ExecCommand = z
  .array(z.string().min(1).max(4096))
  .min(1)
  .max(256)
  .refine((argv) => argv.reduce((n, a) => n + a.length, 0) <= 64 * 1024, "the command is longer than 64 KiB in all");

/** The client's first message. `cols`/`rows` size the tty (ignored without one). */
export const ExecStart = z.object({
  type: z.literal("start"),
  command: ExecCommand,
  tty: z.boolean().default(false),
  cols: TerminalSize.cols.optional(),
  rows: TerminalSize.rows.optional(),
});
export type ExecStart = z.infer<typeof ExecStart>;

export const ExecResize = z.object({ type: z.literal("resize"), ...TerminalSize });
/** No more stdin: the command reads end of file. */
export const ExecStdinEnd = z.object({ type: z.literal("stdin_end") });
/** What a client may send after `start`, passed on to the agent. */
export const ExecClientControl = z.discriminatedUnion("type", [ExecResize, ExecStdinEnd]);
export type ExecClientControl = z.infer<typeof ExecClientControl>;
/**
 * A fresh access token of the same account, for the control plane only (never
 * passed on to the agent): the session then lasts until this token expires
 * instead of the one it was opened with. A client that refreshes its tokens
 * sends it each time; one that does not is cut off at its token's expiry.
 * A token that does not authenticate, or names another account, ends the
 * session with UNAUTHORIZED.
 */
export const ExecRenew = z.object({ type: z.literal("renew"), accessToken: z.string().min(1).max(512) });
export type ExecRenew = z.infer<typeof ExecRenew>;

export const ExecExit = z.object({ type: z.literal("exit"), code: z.number().int() });
export const ExecError = z.object({ type: z.literal("error"), code: z.enum(EXEC_ERROR_CODES), message: z.string().max(2000) });
/** What the server sends besides output. */
export const ExecServerControl = z.discriminatedUnion("type", [ExecExit, ExecError]);
export type ExecServerControl = z.infer<typeof ExecServerControl>;

/** A binary message: the channel byte, then the data. */
export function execFrame(channel: ExecChannel, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(data.length + 1);
  out[0] = channel;
  out.set(data, 1);
  return out;
}

/** The part of a WebSocket (ws's, or a browser's) whose send buffer can be watched. */
export interface SendBuffered {
  readonly readyState: number;
  readonly bufferedAmount: number;
  readonly OPEN: number;
}

/**
 * Calls `resume` once `socket` has fallen to `lowBytes` or less of unsent data,
 * or closed. Both ends of an exec relay pause what feeds a socket that is far
 * behind and resume it here; half the pausing threshold keeps them from
 * flapping. Sockets say nothing when their buffer drains, hence the polling.
 */
export function whenSendBufferBelow(socket: SendBuffered, lowBytes: number, resume: () => void): void {
  const check = setInterval(() => {
    if (socket.readyState === socket.OPEN && socket.bufferedAmount > lowBytes) return;
    clearInterval(check);
    resume();
  }, 20);
}
