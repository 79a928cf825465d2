import type { DeploymentRow, LogRow, Repos } from "@cm/db";
import { type DeploymentStatus, TENANT_ACTIONS } from "@cm/protocol";
import type { EventBus } from "./events";

/** What a follower gets: new lines, a quiet poll (time to send a keep-alive), or the end of the deployment. */
export type LogFollowStep = { kind: "lines"; rows: LogRow[] } | { kind: "quiet" } | { kind: "end"; status: DeploymentStatus | "deleted" };

export type LogFollowOptions = {
  /** The last line the follower has: it gets the lines numbered after it. */
  afterSeq: number;
  /** Only lines at or after this time. */
  sinceMs?: number;
  signal: AbortSignal;
  /** Between two reads of the store when nothing came (default 100 ms). */
  pollMs?: number;
  /** After the deployment ended, how long its agent may still ship its last lines (default 1 s). */
  drainMs?: number;
  /** Lines per step at most (default 1,000). */
  batch?: number;
};

const ENDED: readonly DeploymentStatus[] = TENANT_ACTIONS.start;

/**
 * A deployment's log lines after a cursor, as they are stored, until it has ended
 * and its last lines are out. Status changes come from the event bus (a re-read
 * every 5 s covers a missed one); lines are read from the store, so a follower
 * resumes after any line by its number.
 */
export async function* followLogs(deps: { repos: Repos; events: EventBus }, dep: DeploymentRow, o: LogFollowOptions): AsyncGenerator<LogFollowStep> {
  const pollMs = o.pollMs ?? 100;
  let status: DeploymentStatus | "deleted" = dep.deletedAt === null ? dep.status : "deleted";
  let endedAt: number | undefined = isEnded(status) ? Date.now() : undefined;
  const onChange = (row: DeploymentRow) => {
    if (row.id !== dep.id) return;
    status = row.deletedAt === null ? row.status : "deleted";
    if (isEnded(status)) endedAt ??= Date.now();
    else endedAt = undefined;
  };
  deps.events.on("deployment-changed", onChange);
  let cursor = o.afterSeq;
  let lastRead = Date.now();
  try {
    while (!o.signal.aborted) {
      const rows = await deps.repos.logs.after(dep.id, cursor, o.batch ?? 1_000, o.sinceMs);
      if (rows.length > 0) {
        cursor = rows.at(-1)!.seq;
        yield { kind: "lines", rows };
        continue;
      }
      if (endedAt !== undefined && Date.now() - endedAt >= (o.drainMs ?? 1_000)) {
        yield { kind: "end", status };
        return;
      }
      yield { kind: "quiet" };
      await sleep(pollMs, o.signal);
      if (Date.now() - lastRead >= 5_000) {
        lastRead = Date.now();
        const row = await deps.repos.deployments.get(dep.id);
        onChange(row ?? { ...dep, deletedAt: 0 });
      }
    }
  } finally {
    deps.events.off("deployment-changed", onChange);
  }
}

const isEnded = (s: DeploymentStatus | "deleted") => s === "deleted" || ENDED.includes(s);

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}
