import type { DeploymentRow, TransitionPatch } from "@cm/db";
import { type DeploymentStatus, isLive, restartDelayMs, type StatusFrame } from "@cm/protocol";
import type { z } from "zod";

type Report = Pick<z.infer<typeof StatusFrame>, "runSeq" | "status" | "reason" | "exitCode" | "at">;

/** What an agent's status report means for the stored deployment. */
export type ReportPlan =
  | { kind: "ignore"; why: string }
  /** settleUntilMs: where the charges of a deployment leaving running end (the agent's time of the stop). */
  | { kind: "move"; to: DeploymentStatus; patch: TransitionPatch; settleUntilMs?: number }
  /** A deleted deployment is gone from the node: it leaves the node's desired state. */
  | { kind: "removed" };

// The way up to running; a report never moves a deployment back down it, since
// reports of one run can overtake each other only in that direction.
const PROGRESS: readonly DeploymentStatus[] = ["pending", "pulling", "starting", "running"];

const ignore = (why: string): ReportPlan => ({ kind: "ignore", why });

/**
 * When a report's event happened: the agent's `at`, which may have been queued
 * (the control plane down, a database outage) long before it arrived, held
 * within what can be true. Never in the future; never before the deployment was
 * created, before what was already billed (a previous run's end), or, for an
 * end, before this run began.
 */
export function reportTimeMs(
  dep: Pick<DeploymentRow, "createdAt" | "billedUntil" | "startedAt" | "status">,
  r: Pick<Report, "at" | "status">,
  nowMs: number,
): number {
  const ending = r.status !== "pulling" && r.status !== "starting" && r.status !== "running";
  const notBeforeMs = Math.max(dep.createdAt, dep.billedUntil ?? 0, ending && dep.status === "running" ? (dep.startedAt ?? 0) : 0);
  return Math.min(nowMs, Math.max(notBeforeMs, r.at));
}

/**
 * Maps one report to one transition. Pure, so every case is tested without a
 * socket. A deployment that leaves the live states also gets desiredState
 * `stopped`: it no longer holds a slot or credits, so the agent must not bring
 * it back by itself. Times (running since, stopped at, billed until) are the
 * agent's, not the report's arrival.
 */
export function planReport(dep: DeploymentRow, r: Report, nowMs: number): ReportPlan {
  if (r.runSeq !== dep.runSeq) return ignore(`report for run ${r.runSeq}; the deployment is on run ${dep.runSeq}`);
  const status = dep.status;
  const live = isLive(status);
  const wanted = dep.desiredState;
  const atMs = reportTimeMs(dep, r, nowMs);
  // Leaving the live states: the container stopped at atMs, and running was billed to then.
  const end = (to: DeploymentStatus, patch: TransitionPatch): ReportPlan => ({ kind: "move", to, patch: { ...patch, stoppedAt: atMs }, settleUntilMs: atMs });

  switch (r.status) {
    case "pulling":
    case "starting":
    case "running": {
      if (wanted !== "running") return ignore(`reported ${r.status} but the deployment should be ${wanted}`);
      // Its agent is back (a new connection) and proves it runs: charges resume from this report, and the unreachable note goes.
      if (r.status === "running" && status === "running" && dep.billedUntil === null)
        return { kind: "move", to: "running", patch: { billedUntil: atMs, statusReason: runningReason(dep) } };
      const from = PROGRESS.indexOf(status);
      if (from < 0 || PROGRESS.indexOf(r.status) <= from) return ignore(`reported ${r.status} while ${status}`);
      if (r.status === "running")
        return {
          kind: "move",
          to: "running",
          patch: { startedAt: atMs, billedUntil: billedFrom(dep, atMs), statusReason: runningReason(dep), exitCode: null },
        };
      return { kind: "move", to: r.status, patch: { statusReason: r.status === "pulling" ? "pulling image" : null } };
    }
    case "stopped": {
      if (!live) return ignore(`reported stopped while ${status}`);
      // Asked for: the reason the stop was asked for stays ("stopped by the tenant", credits).
      if (wanted !== "running") return end("stopped", {});
      return end("stopped", { desiredState: "stopped", statusReason: r.reason ?? "the container was stopped on the node" });
    }
    case "exited": {
      if (!live) return ignore(`reported exited while ${status}`);
      const code = r.exitCode ?? 0;
      if (wanted !== "running") return end("stopped", { exitCode: code });
      const reason = r.reason ?? `the container exited with code ${code}`;
      const restart = restartPlan(dep, code, reason, atMs);
      if (restart) return restart;
      const spent =
        code !== 0 && dep.restartPolicy === "on-failure" && dep.restartCount >= dep.maxRestarts
          ? `; not restarted: all ${dep.maxRestarts} restarts were used`
          : "";
      // Ended by itself, whatever its code: exited (the restart policy decided what follows); failed is for what could not start or was lost.
      return end("exited", { desiredState: "stopped", exitCode: code, statusReason: reason + spent });
    }
    case "failed": {
      if (!live) return ignore(`reported failed while ${status}`);
      return end("failed", { desiredState: "stopped", statusReason: r.reason ?? "the deployment failed on the node", exitCode: r.exitCode ?? null });
    }
    case "removed": {
      if (wanted === "removed") return { kind: "removed" };
      if (!live) return ignore(`reported removed while ${status}; it stays ${wanted}`);
      return end("failed", { desiredState: "stopped", statusReason: r.reason ?? "the container was removed on the node", exitCode: r.exitCode ?? null });
    }
  }
}

/**
 * Restart on failure: a container of the running run that exited non-zero, with
 * restarts left, goes back to starting as a new run (charged up to its exit,
 * never between runs) and keeps its slot and hold; the agent then starts the new
 * run as it does a tenant's start. The control plane decides, not the agent or
 * Docker, so each restart is one move in the deployment's history, counted in
 * the database across agent restarts, and a run that did not run is never billed
 * (its wait is charged only once the new run runs: billedFrom).
 * The new run starts after restartDelayMs (the agent waits, told by the spec),
 * which the reason names: starting, unbilled, until then.
 */
function restartPlan(dep: DeploymentRow, code: number, reason: string, atMs: number): ReportPlan | undefined {
  if (code === 0 || dep.status !== "running" || dep.restartPolicy !== "on-failure" || dep.restartCount >= dep.maxRestarts) return undefined;
  const n = dep.restartCount + 1;
  return {
    kind: "move",
    to: "starting",
    patch: { exitCode: code, restartCount: n, statusReason: `${reason}; restarting (${n} of ${dep.maxRestarts}) in ${restartDelayMs(n) / 1000} s` },
    settleUntilMs: atMs,
  };
}

/** What a running deployment's statusReason says: which restart it is on, if any. */
const runningReason = (dep: DeploymentRow) => (dep.restartCount > 0 ? `running again after restart ${dep.restartCount} of ${dep.maxRestarts}` : null);

/**
 * Where a run's charges start. A restart's wait holds the slot (GPUs, cores) as
 * much as a run does, and a container crashing at once used to hold a node for
 * 196 s of waits charged 3.3 s: the wait is charged, from the previous run's
 * exit (where its charges were settled), once the new run is running. What a
 * slow start takes past the wait stays free.
 */
function billedFrom(dep: DeploymentRow, atMs: number): number {
  if (dep.restartCount === 0 || dep.billedUntil === null) return atMs;
  return Math.min(atMs, Math.max(dep.billedUntil, atMs - restartDelayMs(dep.restartCount)));
}

/** Pull progress as the tenant reads it in statusReason. */
export function pullReason(p: { layersDone: number; layersTotal: number; bytesDone?: number | undefined; bytesTotal?: number | undefined }): string {
  const mb = (b: number) => Math.round(b / 1e6);
  const bytes = p.bytesDone !== undefined && p.bytesTotal ? `, ${mb(p.bytesDone)} of ${mb(p.bytesTotal)} MB` : "";
  return `pulling image: ${p.layersDone}/${p.layersTotal} layers${bytes}`;
}
