// Builds the agent's reports. Status frames must reach the control plane (they
// are queued while disconnected); pull progress is only nice to have.
import type { ObservedStatus } from "@cm/protocol";
import type { Clock } from "../clock";
import type { PullProgress } from "../runtime/types";

export interface StatusDetails {
  reason?: string;
  exitCode?: number;
  /** when it happened, if earlier than the report (an exit reported after its last log lines) */
  at?: number;
}

type StatusOut = {
  type: "status";
  deploymentId: string;
  runSeq: number;
  status: ObservedStatus;
  reason?: string;
  exitCode?: number;
  at: number;
};
type PullProgressOut = { type: "pull_progress"; deploymentId: string } & PullProgress;

export interface ReportSink {
  reliable(frame: StatusOut): void;
  unreliable(frame: PullProgressOut): boolean;
}

export const PULL_PROGRESS_INTERVAL_MS = 500;

export class StatusReporter {
  private readonly lastProgressAt = new Map<string, number>();

  constructor(
    private readonly sink: ReportSink,
    private readonly clock: Clock,
  ) {}

  status(deploymentId: string, runSeq: number, status: ObservedStatus, details: StatusDetails = {}): void {
    this.sink.reliable({
      type: "status",
      deploymentId,
      runSeq,
      status,
      ...(details.reason !== undefined ? { reason: details.reason } : {}),
      ...(details.exitCode !== undefined ? { exitCode: details.exitCode } : {}),
      at: details.at ?? this.clock.now(),
    });
  }

  /** At most one frame per deployment every PULL_PROGRESS_INTERVAL_MS, plus the last one. */
  pullProgress(deploymentId: string, progress: PullProgress): void {
    const now = this.clock.now();
    const complete = progress.layersTotal > 0 && progress.layersDone === progress.layersTotal;
    if (!complete && now - (this.lastProgressAt.get(deploymentId) ?? -Infinity) < PULL_PROGRESS_INTERVAL_MS) return;
    this.lastProgressAt.set(deploymentId, now);
    this.sink.unreliable({ type: "pull_progress", deploymentId, ...progress });
  }
}
