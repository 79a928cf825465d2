import { AGENT_WS_PATH, type AgentFrame, CURRENT_PROTOCOL_VERSION, type DeploymentSpec, type ObservedStatus, parseFrame, ServerFrame } from "@cm/protocol";
import WebSocket from "ws";

type FrameOf<T extends ServerFrame["type"]> = Extract<ServerFrame, { type: T }>;
type Waiter = { match(f: ServerFrame): boolean; resolve(f: ServerFrame): void };

export const SPECS = {
  cpuModel: "AMD EPYC 7763",
  cpuCores: 32,
  cpuThreads: 64,
  ramMb: 128_000,
  diskGb: 2000,
  diskType: "NVMe",
  networkSpeedMbps: 10_000,
  os: "Ubuntu 22.04",
  containerVersion: "27.0.3",
};
export const GPU = {
  name: "NVIDIA GeForce RTX 4090",
  vramMb: 24564,
  computeVersion: "8.9",
  brand: "NVIDIA",
  computeCores: 16384,
  tensorCores: 512,
  driverVersion: "550.54.15",
};

/**
 * A real `ws` client playing the agent: it speaks the wire frames and keeps
 * every frame it receives, so a test can wait for the one it expects.
 */
export class SimAgent {
  private inbox: ServerFrame[] = [];
  private waiters: Waiter[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data) => {
      const parsed = parseFrame(ServerFrame, data.toString());
      if (!parsed.ok) throw new Error(`the control plane sent a frame that does not parse: ${parsed.error}`);
      const w = this.waiters.find((x) => x.match(parsed.frame));
      if (w) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve(parsed.frame);
      } else this.inbox.push(parsed.frame);
    });
    this.closed = new Promise((resolve) => ws.on("close", (code, reason) => resolve({ code, reason: reason.toString() })));
  }

  /** `maxPayload`: the largest frame it reads, as a real agent's socket does (ws closes with 1009 past it). */
  static async open(url: string, o: { maxPayload?: number } = {}): Promise<SimAgent> {
    const ws = new WebSocket(url.replace(/^http/, "ws") + AGENT_WS_PATH, o.maxPayload ? { maxPayload: o.maxPayload } : {});
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    return new SimAgent(ws);
  }

  /** Opens, says hello and waits for welcome and the sync. */
  static async connect(url: string, token: string, o: { specs?: boolean; gpus?: number; imagesWithoutCommand?: string[]; agentVersion?: string } = {}) {
    const a = await SimAgent.open(url);
    a.send({ type: "hello", token, agentVersion: o.agentVersion ?? "sim-1", protocolVersions: [CURRENT_PROTOCOL_VERSION] });
    const welcome = await a.next("welcome");
    const sync = await a.next("sync");
    if (o.specs !== false)
      a.send({
        type: "specs",
        specs: SPECS,
        gpus: Array.from({ length: o.gpus ?? 1 }, (_, i) => ({ ...GPU, index: i, uuid: `GPU-${i}` })),
        ...(o.imagesWithoutCommand ? { imagesWithoutCommand: o.imagesWithoutCommand } : {}),
      });
    return { agent: a, welcome, sync };
  }

  send(frame: AgentFrame | Record<string, unknown>) {
    this.ws.send(JSON.stringify(frame));
  }

  sendRaw(data: string | Buffer) {
    this.ws.send(data);
  }

  /** The next frame of this type (and matching `where`) not yet taken, waiting for it if needed. */
  next<T extends ServerFrame["type"]>(type: T, where: (f: FrameOf<T>) => boolean = () => true, timeoutMs = 5000): Promise<FrameOf<T>> {
    const match = (f: ServerFrame) => f.type === type && where(f as FrameOf<T>);
    const i = this.inbox.findIndex(match);
    if (i >= 0) return Promise.resolve(this.inbox.splice(i, 1)[0] as FrameOf<T>);
    return new Promise((resolve, reject) => {
      const w: Waiter = { match, resolve: (f) => (clearTimeout(t), resolve(f as FrameOf<T>)) };
      const t = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        reject(new Error(`no ${type} frame within ${timeoutMs} ms; unclaimed: ${JSON.stringify(this.inbox.map((f) => f.type))}`));
      }, timeoutMs);
      this.waiters.push(w);
    });
  }

  /** Frames received and not taken yet. */
  pending(): ServerFrame[] {
    return [...this.inbox];
  }

  command(deploymentId: string, action?: FrameOf<"command">["action"]) {
    return this.next("command", (c) => c.deployment.deploymentId === deploymentId && (action === undefined || c.action === action));
  }

  heartbeat(running: string[] = []) {
    this.send({ type: "heartbeat", sentAt: Date.now(), running });
  }

  report(spec: Pick<DeploymentSpec, "deploymentId" | "runSeq">, status: string, extra: { reason?: string; exitCode?: number } = {}) {
    this.send({ type: "status", deploymentId: spec.deploymentId, runSeq: spec.runSeq, status: status as ObservedStatus, at: Date.now(), ...extra });
  }

  close() {
    this.ws.close(1000);
    return this.closed;
  }
}
