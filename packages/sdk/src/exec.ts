import type * as P from "@cm/protocol";
import { CmError, NetworkError } from "./errors";
import type { Transport } from "./transport";

// The protocol's words, typed from it (their values would load zod).
const SUBPROTOCOL: typeof P.EXEC_SUBPROTOCOL = "cm.exec.v1";
const BEARER_PREFIX: typeof P.EXEC_BEARER_PROTOCOL_PREFIX = "bearer.";
const CHANNEL: typeof P.EXEC_CHANNEL = { stdin: 0, stdout: 1, stderr: 2 };
/** stdin is sent in pieces well under the server's message limit. */
const STDIN_CHUNK_BYTES = 64 * 1024;
/** stdin queued here past which write() says to wait for drained(). */
const STDIN_HIGH_WATER_BYTES = 1024 * 1024;
const DRAIN_POLL_MS = 20;

/** The part of the WebSocket API this uses: the browser's, and the `ws` package's. */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  readonly bufferedAmount: number;
  send(data: string | ArrayBufferView | ArrayBuffer): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
  addEventListener(type: "close", listener: (event: { code: number }) => void): void;
  addEventListener(type: "open" | "error", listener: (event: unknown) => void): void;
  /** The `ws` package's: stop (and start again) reading the connection. A browser's WebSocket has none. */
  pause?(): void;
  resume?(): void;
}
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

export interface ExecOptions {
  /** argv: ["sh", "-c", "echo hi"] */
  command: string[];
  /** A terminal: output on stdout only, Ctrl-C (\x03) typed becomes SIGINT, programs see a tty. */
  tty?: boolean;
  cols?: number;
  rows?: number;
  /**
   * The command's output. Return a promise (anything else returned is ignored,
   * such as stream.write's boolean) to say "no more until this settles"
   * (a full stdout pipe, say): where the WebSocket can pause (the `ws` package's),
   * this stops reading the connection, the control plane and the agent stop
   * reading behind it, and the command waits on its writes. A browser's
   * WebSocket cannot pause: what arrives meanwhile is held in memory.
   */
  onStdout?(data: Uint8Array): unknown;
  onStderr?(data: Uint8Array): unknown;
  /** Where there is no global WebSocket (Node 20): the `ws` package's. */
  WebSocket?: WebSocketConstructor;
}

export interface ExecSession {
  /** Resolves once the session is open (the command is being started). */
  readonly opened: Promise<void>;
  /** The command's exit code; rejects with ExecError, ApiError or NetworkError when it ended without one. */
  readonly exit: Promise<number>;
  /**
   * Sends bytes to the command's stdin. False once more is queued than the
   * command is taking: send no more until `drained()`, or a large input is held
   * in memory here (the control plane reads only as fast as the command does).
   */
  write(data: Uint8Array | string): boolean;
  /** Resolves once write() may be called again (at once when it already may), or the session is over. */
  drained(): Promise<void>;
  /** No more stdin: the command reads end of file. */
  end(): void;
  resize(cols: number, rows: number): void;
  /** Hangs up on the command (SIGHUP with a tty). */
  close(): void;
}

/** The session ended without an exit code: `code` is the server's reason (P.ExecErrorCode). */
export class ExecError extends CmError {
  declare readonly code: P.ExecErrorCode;
}

/**
 * Runs a command in a deployment's container over GET /deployments/{id}/exec.
 * The token travels as a subprotocol (browsers cannot set headers on a
 * WebSocket); when the server refuses the upgrade, which a WebSocket does not
 * show, the same route is asked over plain HTTP for the API's error. The
 * server ends a session when the access token it was opened with expires:
 * before that, the token is refreshed and sent along (`renew`), again and
 * again, for as long as the session lasts and the session can be refreshed.
 */
/**
 * A WebSocket to `path` speaking `subprotocol`, the access token riding as a second
 * subprotocol (a browser's WebSocket cannot send headers); binary messages as ArrayBuffers.
 * Exec and TCP connections open theirs here.
 */
export function bearerSocket(
  t: Transport,
  path: string,
  subprotocol: string,
  token: string,
  Ctor = (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket,
): { socket: WebSocketLike; url: string } {
  if (!Ctor) throw new CmError("NO_WEBSOCKET", "no WebSocket here: pass one as the WebSocket option (in Node 20, the ws package's)");
  const url = t.url(path).replace(/^http/, "ws");
  const socket = new Ctor(url, [subprotocol, `${BEARER_PREFIX}${token}`]);
  socket.binaryType = "arraybuffer";
  return { socket, url };
}

/**
 * Keeps an open session's access token fresh: shortly before it would expire
 * (Transport.renewInMs) a `renew` message carries a new one, so the server does
 * not end the session at the old one's expiry. `live` answers the socket while the
 * session is open, undefined once it is over. Returns what stops it.
 */
export function keepRenewed(t: Transport, live: () => WebSocketLike | undefined): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const later = async () => {
    const inMs = await t.renewInMs().catch(() => undefined);
    if (inMs === undefined || stopped || !live()) return;
    timer = setTimeout(async () => {
      // Refreshed now, as it is within refreshBeforeMs of its expiry (or already fresh, refreshed by another call).
      // Without one (signed out, or the session cannot be refreshed) the server ends the session at the token's expiry and says why.
      const accessToken = await t.accessToken().catch(() => undefined);
      const ws = live();
      if (accessToken === undefined || stopped || !ws) return;
      ws.send(JSON.stringify({ type: "renew", accessToken } satisfies P.ExecRenew));
      void later();
    }, inMs);
  };
  void later();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

export function exec(t: Transport, id: string, options: ExecOptions): ExecSession {
  const path = `/deployments/${encodeURIComponent(id)}/exec`;
  const encoder = new TextEncoder();
  const pending: Array<string | Uint8Array> = [];
  let ws: WebSocketLike | undefined;
  let isOpen = false;
  let closed = false;
  let ended = false;
  let pendingBytes = 0;
  const send = (m: string | Uint8Array) => {
    if (ws && isOpen) return ws.send(m);
    pending.push(m);
    pendingBytes += m.length;
  };
  const queued = () => pendingBytes + (ws && isOpen ? ws.bufferedAmount : 0);

  let opened!: () => void;
  let notOpened!: (err: unknown) => void;
  const openedP = new Promise<void>((resolve, reject) => {
    opened = resolve;
    notOpened = reject;
  });
  let stopRenewing = () => {};

  const exit = (async () => {
    const token = await t.accessToken();
    if (closed) throw new ExecError("SESSION_ENDED", "the session was closed before it opened");
    const { socket, url } = bearerSocket(t, path, SUBPROTOCOL, token, options.WebSocket);
    ws = socket;
    return await new Promise<number>((resolve, reject) => {
      let code: number | undefined;
      let error: ExecError | undefined;
      socket.addEventListener("open", () => {
        isOpen = true;
        socket.send(JSON.stringify({ type: "start", command: options.command, tty: options.tty ?? false, cols: options.cols, rows: options.rows }));
        for (const m of pending.splice(0)) socket.send(m);
        pendingBytes = 0;
        opened();
        stopRenewing = keepRenewed(t, () => (ended || closed ? undefined : socket));
      });
      socket.addEventListener("message", ({ data }) => {
        if (typeof data === "string") {
          const m = JSON.parse(data) as P.ExecServerControl;
          if (m.type === "exit") code = m.code;
          else error = new ExecError(m.code, m.message);
          return;
        }
        if (closed) return;
        const bytes = new Uint8Array(data as ArrayBuffer);
        const body = bytes.subarray(1);
        const held = bytes[0] === CHANNEL.stdout ? options.onStdout?.(body) : bytes[0] === CHANNEL.stderr ? options.onStderr?.(body) : undefined;
        if (typeof (held as PromiseLike<unknown> | undefined)?.then === "function") holdUntil(held as PromiseLike<unknown>);
      });
      // Output the caller is not ready for: read no more of the connection until every such promise settled.
      let holding = 0;
      const holdUntil = (held: PromiseLike<unknown>) => {
        if (holding++ === 0) socket.pause?.();
        const release = () => {
          if (--holding === 0 && !ended && !closed) socket.resume?.();
        };
        held.then(release, release);
      };
      socket.addEventListener("close", () => {
        ended = true;
        stopRenewing();
        if (code !== undefined) return resolve(code);
        if (error) return reject(error);
        if (closed) return reject(new ExecError("SESSION_ENDED", "the session was closed"));
        if (isOpen) return reject(new ExecError("SESSION_ENDED", "the connection to the control plane was lost"));
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
  exit.catch(notOpened);
  // A caller that only awaits exit must not also see an unhandled opened.
  openedP.catch(() => undefined);

  return {
    opened: openedP,
    exit,
    write(data) {
      const bytes = typeof data === "string" ? encoder.encode(data) : data;
      for (let i = 0; i < bytes.length; i += STDIN_CHUNK_BYTES) {
        const piece = bytes.subarray(i, i + STDIN_CHUNK_BYTES);
        const frame = new Uint8Array(piece.length + 1);
        frame[0] = CHANNEL.stdin;
        frame.set(piece, 1);
        send(frame);
      }
      return queued() <= STDIN_HIGH_WATER_BYTES;
    },
    drained: () =>
      new Promise<void>((resolve) => {
        const check = () => (ended || queued() <= STDIN_HIGH_WATER_BYTES / 2 ? resolve() : void setTimeout(check, DRAIN_POLL_MS));
        check();
      }),
    end: () => send(JSON.stringify({ type: "stdin_end" })),
    resize: (cols, rows) => send(JSON.stringify({ type: "resize", cols, rows })),
    close() {
      closed = true;
      stopRenewing();
      ws?.close(1000);
      // A paused socket would not read the server's answering close (ws then waits 30 s): read on; what output comes is dropped.
      ws?.resume?.();
    },
  };
}
