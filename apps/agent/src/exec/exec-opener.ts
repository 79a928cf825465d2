import {
  AGENT_EXEC_PATH,
  clampToSchema,
  EXEC_CHANNEL,
  EXEC_CLOSE_CODES,
  EXEC_MAX_MESSAGE_BYTES,
  ExecClientControl,
  type ExecErrorCode,
  ExecServerControl,
  execFrame,
  type OpenExecFrame,
  parseFrame,
  whenSendBufferBelow,
} from "@cm/protocol";
import WebSocket from "ws";
import type { z } from "zod";
import type { Logger } from "../logger";
import type { ContainerRuntime, ExecProcess } from "../runtime/container-runtime";
import type { ContainerState } from "../runtime/types";

export type ExecRequest = z.infer<typeof OpenExecFrame>;

export type ExecOpenerOptions = {
  /** http(s)://control-plane[/base]: the session's connection goes to its AGENT_EXEC_PATH */
  httpUrl: string;
  token: string;
  runtime: ContainerRuntime;
  /** this node's running container of a deployment (Reconciler.runningContainer): the only kind a session enters */
  runningContainer(deploymentId: string): Promise<ContainerState | undefined>;
  logger: Logger;
  connectTimeoutMs?: number;
};

/** Output queued for a slow client beyond which the command's output is paused. */
const OUTPUT_BUFFER_BYTES = 1024 * 1024;
/** What is kept of the client's input while the command is being started; past it the connection is read no more until it is. */
const EARLY_INPUT_BYTES = 1024 * 1024;
/** While stdin is held the connection is not read, not even a close: a ping this often finds out that it went away. */
const HELD_PING_MS = 15_000;

/** ws(s)://control-plane[/base]/agent/exec */
export const execUrlOf = (httpUrl: string) => `${httpUrl.replace(/^http/, "ws")}${AGENT_EXEC_PATH}`;

/**
 * Runs tenants' commands in their containers (cm exec): each session gets a
 * WebSocket of its own to the control plane, opened from here as tunnels are,
 * so the node needs no inbound port and a busy shell never delays the
 * control connection.
 *
 * Only the running container labelled with the requested deployment is ever
 * entered: never the host, never another deployment's container.
 */
export class ExecOpener {
  private readonly open = new Set<WebSocket>();
  /** Every session from its dial until its command ended and was hung up on: what closeAll ends and waits for. */
  private readonly sessions = new Map<WebSocket, Promise<void>>();
  /** Sessions whose command has not read what it was sent: their connection is paused. */
  private readonly held = new Set<WebSocket>();
  /** Sessions applying a resize: what the client sent after it waits here, in order. */
  private readonly afterResize = new Map<WebSocket, Array<{ data: WebSocket.RawData; isBinary: boolean }>>();
  constructor(private readonly o: ExecOpenerOptions) {}

  async openExec(req: ExecRequest): Promise<void> {
    const ws = this.dial(req.execId);
    const session = this.session(ws, req);
    this.sessions.set(ws, session);
    try {
      await session;
    } finally {
      this.sessions.delete(ws);
    }
  }

  private async session(ws: WebSocket, req: ExecRequest): Promise<void> {
    const log = this.o.logger.child({ execId: req.execId, deploymentId: req.deploymentId });
    // Listening before the handshake ends: the control plane sends what the client
    // typed meanwhile right behind its 101, and those messages may arrive with it.
    // They are kept, in order, while the container is found and the command started.
    const early: Array<{ data: WebSocket.RawData; isBinary: boolean }> = [];
    let earlyBytes = 0;
    let proc: ExecProcess | undefined;
    ws.on("message", (data, isBinary) => {
      if (proc) return this.input(proc, ws, data, isBinary);
      early.push({ data, isBinary });
      earlyBytes += rawLength(data);
      if (earlyBytes > EARLY_INPUT_BYTES) ws.pause();
    });
    const opened = await this.opened(ws).catch((err: Error) => err);
    if (opened instanceof Error) return void log.warn("exec connection failed", { error: opened.message });
    this.open.add(ws);
    ws.on("close", () => {
      this.open.delete(ws);
      void proc?.detach();
    });
    const fail = (code: ExecErrorCode, message: string) => {
      send(ws, { type: "error", code, message });
      ws.close(EXEC_CLOSE_CODES.FAILED);
    };

    const container = await this.o.runningContainer(req.deploymentId).catch(() => undefined);
    if (!container) return fail("EXEC_REFUSED", `deployment ${req.deploymentId} has no running container on this node`);

    try {
      proc = await this.o.runtime.exec(container.id, {
        command: req.command,
        tty: req.tty,
        ...(req.cols ? { cols: req.cols } : {}),
        ...(req.rows ? { rows: req.rows } : {}),
        onOutput: (stream, chunk) => {
          if (ws.readyState !== WebSocket.OPEN) return;
          ws.send(execFrame(EXEC_CHANNEL[stream], chunk));
          // A client that reads slower than the command writes: hold the command's output back.
          if (ws.bufferedAmount > OUTPUT_BUFFER_BYTES && proc) this.holdOutput(proc, ws);
        },
      });
    } catch (err) {
      return fail("EXEC_FAILED", `the container engine could not run the command: ${(err as Error).message}`);
    }
    log.info("exec started", { tty: req.tty, argv0: req.command[0] });
    // Gone while the command was being started (the client left, the agent is stopping): hang it up at once.
    if (ws.readyState !== WebSocket.OPEN) return proc.detach();
    for (const m of early.splice(0)) this.input(proc, ws, m.data, m.isBinary);
    this.resumeUnlessHeld(ws);
    const code = await proc.exit;
    log.info("exec ended", { exitCode: code });
    send(ws, { type: "exit", code });
    ws.close(EXEC_CLOSE_CODES.NORMAL);
    // A connection closed before the end hung the command up (its close handler): the session lasts until that is done.
    await proc.detach();
  }

  /** What the control plane relays of the client's messages (it checked them; checked again, cheaply). */
  private input(proc: ExecProcess, ws: WebSocket, data: WebSocket.RawData, isBinary: boolean) {
    const waiting = this.afterResize.get(ws);
    if (waiting) return void waiting.push({ data, isBinary });
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    if (isBinary) {
      if (buf[0] === EXEC_CHANNEL.stdin && !proc.write(buf.subarray(1))) this.holdInput(proc, ws);
      return;
    }
    const parsed = parseFrame(ExecClientControl, buf.toString("utf8"));
    if (!parsed.ok) return ws.close(EXEC_CLOSE_CODES.BAD_MESSAGE);
    if (parsed.frame.type === "stdin_end") return proc.endStdin();
    // What the client typed after resizing must reach a terminal of the new size
    // (`stty size` right after a resize answers the new one): nothing more is
    // handled, or read, until the engine has applied it.
    this.afterResize.set(ws, []);
    ws.pause();
    void proc
      .resize(parsed.frame.cols, parsed.frame.rows)
      .catch(() => undefined)
      .then(() => {
        const later = this.afterResize.get(ws) ?? [];
        this.afterResize.delete(ws);
        for (const [i, m] of later.entries()) {
          this.input(proc, ws, m.data, m.isBinary);
          // Another resize among them: it takes the rest.
          const again = this.afterResize.get(ws);
          if (again) return void again.push(...later.slice(i + 1));
        }
        this.resumeUnlessHeld(ws);
      });
  }

  /** Reads the client again unless its input is held back for another reason. */
  private resumeUnlessHeld(ws: WebSocket) {
    if (!this.held.has(ws) && !this.afterResize.has(ws)) ws.resume();
  }

  /** The command reads its stdin slower than the client sends: read no more of the client until it catches up. */
  private holdInput(proc: ExecProcess, ws: WebSocket) {
    if (this.held.has(ws)) return;
    this.held.add(ws);
    ws.pause();
    const ping = setInterval(() => ws.readyState === WebSocket.OPEN && ws.ping(), HELD_PING_MS);
    void proc.drained().then(() => {
      clearInterval(ping);
      this.held.delete(ws);
      this.resumeUnlessHeld(ws);
    });
  }

  private holdOutput(proc: ExecProcess, ws: WebSocket) {
    proc.pauseOutput();
    whenSendBufferBelow(ws, OUTPUT_BUFFER_BYTES / 2, () => proc.resumeOutput());
  }

  private dial(execId: string): WebSocket {
    return new WebSocket(`${execUrlOf(this.o.httpUrl)}?id=${encodeURIComponent(execId)}`, {
      headers: { authorization: `Bearer ${this.o.token}` },
      handshakeTimeout: this.o.connectTimeoutMs ?? 5_000,
      maxPayload: EXEC_MAX_MESSAGE_BYTES,
      perMessageDeflate: false,
    });
  }

  private opened(ws: WebSocket): Promise<void> {
    return new Promise((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("unexpected-response", (_req, res) => {
        res.resume();
        ws.terminate();
        reject(new Error(`the control plane refused the exec connection (${res.statusCode})`));
      });
      ws.once("error", reject);
    });
  }

  /**
   * Ends every session (the agent is shutting down): their commands are hung up
   * on, and settles once that is done, kills included, so that a command
   * ignoring the hang-up does not outlive an agent that exits right after.
   */
  async closeAll(): Promise<void> {
    // Those still dialling or starting their command too: one started after this returned would run unseen.
    const sessions = [...this.sessions];
    for (const [ws] of sessions) ws.terminate();
    this.open.clear();
    await Promise.all(sessions.map(([, session]) => session.catch(() => undefined)));
  }
}

function rawLength(data: WebSocket.RawData): number {
  return Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : data.byteLength;
}

/** Every control message the agent sends on an exec leg, its strings clamped to the schema's limits (the engine's error text among them). */
function send(ws: WebSocket, message: ExecServerControl) {
  if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(clampToSchema(ExecServerControl, message)));
}
