// The agent's deployment logic as production wires it (Reconciler, StatusReporter,
// LogShipping) over the in-memory engine and a fake clock, with production
// timings. What would go to the control plane is recorded in order, and log
// frames are acknowledged the way the control plane does once it stored them.
import type { DeploymentSpec, LogLineFrame } from "@cm/protocol";
import type { Timing } from "../../src/config";
import { parseAgentConfig } from "../../src/config";
import type { GpuInfo } from "../../src/host/types";
import { silentLogger } from "../../src/logger";
import { LogShipping } from "../../src/logs/log-shipping";
import type { PullLimits } from "../../src/reconcile/pull-watch";
import { Reconciler } from "../../src/reconcile/reconciler";
import type { ReportSink } from "../../src/reconcile/status-reporter";
import { StatusReporter } from "../../src/reconcile/status-reporter";
import { FakeClock } from "./fake-clock";
import { MemoryRuntime } from "./memory-runtime";

export const NODE_ID = "node_memory";
/** the agent's extra labels (AGENT_CONTAINER_LABELS): on every container, and the filter that finds its own */
export const CONTAINER_LABELS = { "cm.test": "memory" };
export const IMAGE = "registry.example/app:1";

type StatusFrame = Parameters<ReportSink["reliable"]>[0];
type PullProgressFrame = Parameters<ReportSink["unreliable"]>[0];
type LogsFrame = { type: "logs"; deploymentId: string; lines: LogLineFrame[] };
export type SentFrame = StatusFrame | PullProgressFrame | LogsFrame;

export interface HarnessOptions {
  gpus?: GpuInfo[];
  engine?: MemoryRuntime;
  clock?: FakeClock;
  installId?: string;
  /** shorter or smaller than production's, e.g. logMaxInflightLines */
  timing?: Partial<Timing>;
  /** AGENT_PULL_TIMEOUT_S and AGENT_PULL_STALL_S, in ms; production's defaults without */
  pullLimits?: PullLimits;
}

export function reconcilerHarness(options: HarnessOptions = {}) {
  const clock = options.clock ?? new FakeClock();
  const engine = options.engine ?? new MemoryRuntime(clock);
  const timing = { ...parseAgentConfig({ controlPlaneUrl: "ws://control-plane.invalid", token: "t" }).timing, ...options.timing };
  const sent: SentFrame[] = [];
  const link = { connected: true, acking: true };
  const stored = new Map<string, Map<number, LogLineFrame>>();
  let duplicateLines = 0;

  /** logs frames the control plane has not answered yet, while it is not acking */
  const unanswered: LogsFrame[] = [];
  const store = (frame: LogsFrame) => {
    const lines = stored.get(frame.deploymentId) ?? new Map<number, LogLineFrame>();
    stored.set(frame.deploymentId, lines);
    for (const line of frame.lines) {
      if (lines.has(line.seq)) duplicateLines += 1;
      lines.set(line.seq, line);
    }
    const last = frame.lines.at(-1)!;
    // Answered after the store, as the control plane's frame queue does.
    queueMicrotask(() => logs.onAck(frame.deploymentId, { seq: last.seq, dockerTs: last.ts }));
  };
  const logs: LogShipping = new LogShipping({
    runtime: engine,
    send: (frame) => {
      if (!link.connected) return false;
      sent.push(frame);
      if (link.acking) store(frame);
      else unanswered.push(frame);
      return true;
    },
    clock,
    logger: silentLogger,
    timing,
  });
  const reporter = new StatusReporter(
    {
      reliable: (frame) => sent.push(frame),
      unreliable: (frame) => {
        sent.push(frame);
        return true;
      },
    },
    clock,
  );
  const reconciler = new Reconciler({
    runtime: engine,
    reporter,
    logs,
    clock,
    logger: silentLogger,
    containerLabels: CONTAINER_LABELS,
    installId: () => options.installId,
    containerStopTimeoutS: timing.containerStopTimeoutS,
    ...(options.pullLimits ? { pullLimits: options.pullLimits } : {}),
    nodeFacts: async () => ({ gpus: options.gpus ?? [], cpuThreads: 16, ramMb: 65_536 }),
    canShipLogs: () => link.connected,
  });
  reconciler.setNodeId(NODE_ID);

  return {
    clock,
    engine,
    reconciler,
    logs,
    link,
    timing,
    /** everything that went to the control plane, in order */
    sent,
    /** the status reports of one deployment, as "<runSeq>:<status>" */
    statuses: (deploymentId: string) =>
      sent.filter((f): f is StatusFrame => f.type === "status" && f.deploymentId === deploymentId).map((f) => `${f.runSeq}:${f.status}`),
    lastStatus: (deploymentId: string) => sent.filter((f): f is StatusFrame => f.type === "status" && f.deploymentId === deploymentId).at(-1),
    /** the lines the control plane stored for a deployment, by seq */
    storedLines: (deploymentId: string) => [...(stored.get(deploymentId)?.values() ?? [])].sort((a, b) => a.seq - b.seq),
    /** The control plane stores and acknowledges, in order, the frames it left unanswered. */
    answerPending: () => {
      for (const frame of unanswered.splice(0)) store(frame);
    },
    /** The connection drops: the agent stops shipping (as Agent.onDown does) until the next sync. */
    disconnect: () => {
      link.connected = false;
      unanswered.splice(0);
      logs.stopAll();
    },
    /** The control plane's cursor for a deployment: its newest stored line. */
    cursor: (deploymentId: string) => {
      const last = [...(stored.get(deploymentId)?.values() ?? [])].sort((a, b) => a.seq - b.seq).at(-1);
      return last ? { seq: last.seq, dockerTs: last.ts } : { seq: 0, dockerTs: null };
    },
    get duplicateLines() {
      return duplicateLines;
    },
    /** Runs `work` while moving the clock on until it settles. */
    async settle<T>(work: Promise<T>, limitMs = 120_000): Promise<T> {
      let done = false;
      const result = work.finally(() => (done = true));
      await clock.advanceUntil(() => done, "the reconciler's work", limitMs);
      return result;
    },
  };
}

export function spec(deploymentId: string, overrides: Partial<DeploymentSpec> = {}): DeploymentSpec {
  return {
    deploymentId,
    userId: "usr_tenant",
    runSeq: 1,
    desiredState: "running",
    image: IMAGE,
    env: {},
    ports: [],
    gpuCount: 0,
    logCursor: { seq: 0, dockerTs: null },
    ...overrides,
  };
}
