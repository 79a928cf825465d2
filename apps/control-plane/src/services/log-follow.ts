import type { DeploymentRow, LogRow } from "@cm/db";
import { type DeploymentStatus, TENANT_ACTIONS } from "@cm/protocol";
import type { DeploymentWatch } from "./deployment-watch";

/** What a follower gets: new lines, a quiet poll (time to send a keep-alive), or the end of the deployment. */
export type LogFollowStep = { kind: "lines"; rows: LogRow[] } | { kind: "quiet" } | { kind: "end"; status: DeploymentStatus | "deleted" };

export type LogFollowOptions = {
  /** The last line the follower has: it gets the lines numbered after it. */
  afterSeq: number;
  /** Only lines at or after this time. */
  sinceMs?: number;
  signal: AbortSignal;
  /**
   * How often a quiet follower gets a quiet step (default 1 s). The store is read
   * only when the watch wakes the follower: at once for lines stored here, and every
   * STREAM_FALLBACK_MS for those another replica stored.
   */
  quietMs?: number;
  /** After the deployment ended, how long its agent may still ship its last lines (default 1 s). */
  drainMs?: number;
  /** Lines per step at most (default 1,000). */
  batch?: number;
};

const ENDED: readonly DeploymentStatus[] = TENANT_ACTIONS.start;

/**
 * A deployment's log lines after a cursor, as they are stored, until it has ended
 * and its last lines are out. Status changes and wake-ups come from the watch;
 * lines are read from the store, so a follower resumes after any line by its number.
 */
export async function* followLogs(deps: { watch: DeploymentWatch }, dep: DeploymentRow, o: LogFollowOptions): AsyncGenerator<LogFollowStep> {
  const quietMs = o.quietMs ?? 1_000;
  let status: DeploymentStatus | "deleted" = dep.deletedAt === null ? dep.status : "deleted";
  let endedAt: number | undefined = isEnded(status) ? Date.now() : undefined;
  const stopRows = deps.watch.onRow(dep.id, (row) => {
    status = row ? row.status : "deleted";
    if (isEnded(status)) endedAt ??= Date.now();
    else endedAt = undefined;
  });
  // Set by a wake-up that came while the store was being read, so that read's answer is not trusted to be the last.
  let woken = false;
  let wake: (() => void) | undefined;
  const stopLines = deps.watch.onLines(dep.id, () => {
    woken = true;
    wake?.();
  });
  let cursor = o.afterSeq;
  let read = true;
  try {
    while (!o.signal.aborted) {
      if (read) {
        woken = false;
        const rows = await deps.watch.readLines(dep.id, cursor, o.batch ?? 1_000, o.sinceMs);
        if (rows.length > 0) {
          cursor = rows.at(-1)!.seq;
          yield { kind: "lines", rows };
          continue;
        }
      }
      if (endedAt !== undefined && Date.now() - endedAt >= (o.drainMs ?? 1_000)) {
        yield { kind: "end", status };
        return;
      }
      yield { kind: "quiet" };
      if (!woken) {
        // An ended deployment's follower waits only for the drain's end.
        const waitMs = endedAt === undefined ? quietMs : Math.min(quietMs, Math.max(0, endedAt + (o.drainMs ?? 1_000) - Date.now()));
        await sleep(waitMs, o.signal, (fn) => {
          wake = fn;
        });
        wake = undefined;
      }
      // Once ended, the last lines are read whenever it wakes: the end must come after them.
      read = woken || endedAt !== undefined;
    }
  } finally {
    stopRows();
    stopLines();
  }
}

const isEnded = (s: DeploymentStatus | "deleted") => s === "deleted" || ENDED.includes(s);

/** Resolves after `ms`, on abort, or when the function handed to `wakeBy` is called. */
function sleep(ms: number, signal: AbortSignal, wakeBy: (wake: () => void) => void): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    wakeBy(done);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}
