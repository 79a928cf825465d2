import type * as P from "@cm/protocol";
import { CmError, NetworkError } from "./errors";
import { bearerSocket, keepRenewed, type WebSocketConstructor, type WebSocketLike } from "./exec";
import type { Transport } from "./transport";

// The protocol's words, typed from it (their values would load zod).
const SUBPROTOCOL: typeof P.TCP_SUBPROTOCOL = "cm.tcp.v1";
/** Bytes are sent in pieces well under the server's message limit (TCP_MAX_MESSAGE_BYTES). */
const CHUNK_BYTES = 64 * 1024;
/** Bytes queued here past which write() says to wait for drained(). */
const HIGH_WATER_BYTES = 1024 * 1024;
const DRAIN_POLL_MS = 20;

export interface TcpOptions {
  /**
   * Bytes from the container's port. Return a promise to say "no more until
   * this settles" (a local socket that is full): where the WebSocket can pause
   * (the `ws` package's), this stops reading the connection and the control
   * plane stops reading the container behind it.
   */
  onData?(data: Uint8Array): unknown;
  /** Where there is no global WebSocket (Node 20): the `ws` package's. */
  WebSocket?: WebSocketConstructor;
}

/** How a connection ended: the WebSocket's close code (P.TCP_CLOSE_CODES) and reason. */
export type TcpClose = { code: number; reason: string };

export interface TcpConnection {
  /** Resolves once the container's port is connected; rejects with the API's refusal (ApiError) or a NetworkError. */
  readonly opened: Promise<void>;
  /** Resolves once the connection is over, however it ended (after `opened` rejected too). */
  readonly closed: Promise<TcpClose>;
  /** Sends bytes to the container's port. False once more is queued than it takes: wait for drained(). */
  write(data: Uint8Array): boolean;
  /** Resolves once write() may be called again (at once when it already may), or the connection is over. */
  drained(): Promise<void>;
  /** Closes the connection (the container's side is closed too). */
  close(): void;
}

/**
 * A TCP connection to one of a running deployment's tcpPorts over
 * GET /deployments/{id}/tcp/{port}: what `cm port-forward` opens for each local
 * connection. The token travels as a subprotocol, as exec's does; a refusal
 * before the upgrade is read from the same route over plain HTTP. The access
 * token is renewed on the open connection as exec renews it.
 */
export function tcp(t: Transport, id: string, port: number, options: TcpOptions = {}): TcpConnection {
  const path = `/deployments/${encodeURIComponent(id)}/tcp/${port}`;
  const pending: Uint8Array[] = [];
  let pendingBytes = 0;
  let ws: WebSocketLike | undefined;
  let isOpen = false;
  let ended = false;
  let closedByUs = false;
  const queued = () => pendingBytes + (ws && isOpen ? ws.bufferedAmount : 0);

  let settleClosed!: (c: TcpClose) => void;
  const closed = new Promise<TcpClose>((resolve) => {
    settleClosed = resolve;
  });
  let stopRenewing = () => {};

  const opened = (async () => {
    const token = await t.accessToken();
    if (closedByUs) throw new CmError("CLOSED", "the connection was closed before it opened");
    const { socket, url } = bearerSocket(t, path, SUBPROTOCOL, token, options.WebSocket);
    ws = socket;
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener("open", () => {
        isOpen = true;
        for (const m of pending.splice(0)) socket.send(m);
        pendingBytes = 0;
        resolve();
        // Without renewals the server ends the connection at the token's expiry (close code 4401).
        stopRenewing = keepRenewed(t, () => (ended ? undefined : socket));
      });
      let holding = 0;
      socket.addEventListener("message", ({ data }) => {
        if (typeof data === "string" || ended) return;
        const held = options.onData?.(new Uint8Array(data as ArrayBuffer));
        if (typeof (held as PromiseLike<unknown> | undefined)?.then !== "function") return;
        // Bytes the caller is not ready for: read no more of the connection until each such promise settled.
        if (holding++ === 0) socket.pause?.();
        const release = () => {
          if (--holding === 0 && !ended) socket.resume?.();
        };
        (held as PromiseLike<unknown>).then(release, release);
      });
      socket.addEventListener("close", (event) => {
        ended = true;
        stopRenewing();
        const { code, reason } = event as { code: number; reason?: string };
        settleClosed({ code, reason: reason ?? "" });
        if (isOpen || closedByUs) return reject(new CmError("CLOSED", "the connection was closed before it opened"));
        // Refused before the upgrade: the plain route says why (a WebSocket cannot read the refusal).
        t.send("GET", path, { auth: true }).then(
          () => reject(new NetworkError(url, new Error("the WebSocket could not be opened"))),
          (err: unknown) =>
            reject((err as { code?: string }).code === "UPGRADE_REQUIRED" ? new NetworkError(url, new Error("the WebSocket could not be opened")) : err),
        );
      });
      socket.addEventListener("error", () => undefined);
    });
  })();
  opened.catch(() => {
    if (!ws) {
      ended = true;
      settleClosed({ code: 1006, reason: "not opened" });
    }
  });

  return {
    opened,
    closed,
    write(data) {
      for (let i = 0; i < data.length; i += CHUNK_BYTES) {
        const piece = data.subarray(i, i + CHUNK_BYTES);
        if (ended) break;
        if (ws && isOpen) ws.send(piece);
        else {
          pending.push(piece);
          pendingBytes += piece.length;
        }
      }
      return queued() <= HIGH_WATER_BYTES;
    },
    drained: () =>
      new Promise<void>((resolve) => {
        const check = () => (ended || queued() <= HIGH_WATER_BYTES / 2 ? resolve() : void setTimeout(check, DRAIN_POLL_MS));
        check();
      }),
    close() {
      closedByUs = true;
      stopRenewing();
      ws?.close(1000);
      // A paused socket would not read the server's answering close: read on; what comes is dropped.
      ws?.resume?.();
    },
  };
}

/**
 * Asks the route over plain HTTP whether a connection would be taken now, with
 * the same checks (the deployment is yours and running, the port is one of its
 * tcpPorts, its node is connected), without connecting to the container: the
 * route's error as an ApiError, or nothing when all is well.
 */
export async function checkTcp(t: Transport, id: string, port: number): Promise<void> {
  try {
    await t.send("GET", `/deployments/${encodeURIComponent(id)}/tcp/${port}`, { auth: true });
  } catch (err) {
    // The answer a WebSocket client would get past every check.
    if ((err as { code?: string }).code === "UPGRADE_REQUIRED") return;
    throw err;
  }
}
