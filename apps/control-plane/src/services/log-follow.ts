import type { DeploymentRow, LogRow } from "@cm/db";
import { type DeploymentStatus, TENANT_ACTIONS } from "@cm/protocol";
import type { DeploymentWatch } from "./deployment-watch";

/** What a follower gets: new lines (a late one, stored after higher-numbered ones, may come after them), a quiet poll (time to send a keep-alive), or the end of the deployment. */
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
  /** Text per step at most, about (UTF-8 bytes; default no bound): a step of lines found late and one of new lines, each at most this, always one line. */
  maxBytes?: number;
};

const ENDED: readonly DeploymentStatus[] = TENANT_ACTIONS.start;
/** A missing line is looked for this long after it was passed over; then it is taken as never coming (a new run's numbering skips, trimmed lines). */
const HOLE_KEEP_MS = 5 * 60_000;
const MAX_HOLES = 64;

/**
 * Lines numbered between ones the follower got, not stored when it read past
 * them: an agent sends a refused batch again after later ones were stored
 * (LOGS_RATE_LIMITED), so a cursor by line number alone would skip it.
 */
type Hole = { from: number; to: number; seenAtMs: number };

/**
 * A deployment's log lines after a cursor, as they are stored, until it has ended
 * and its last lines are out; a line stored after higher-numbered ones still
 * reaches a follower that passed its number (see Hole). Status changes and wake-ups come from the watch;
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
  let holes: Hole[] = [];
  let read = true;
  const batch = o.batch ?? 1_000;
  const maxBytes = o.maxBytes ?? Number.POSITIVE_INFINITY;
  // The lines stored since in the holes, a page's worth at most; what is still missing, or not read yet, stays a hole.
  const fillHoles = async (nowMs: number) => {
    const found: LogRow[] = [];
    let bytes = 0;
    const left: Hole[] = [];
    for (const hole of holes) {
      if (nowMs - hole.seenAtMs > HOLE_KEEP_MS) continue;
      if (found.length >= batch || bytes >= maxBytes) {
        left.push(hole);
        continue;
      }
      const limit = Math.min(hole.to - hole.from + 1, batch - found.length);
      const rows = (await deps.watch.readLines(dep.id, hole.from - 1, limit, o.sinceMs, o.maxBytes)).filter((r) => r.seq <= hole.to);
      found.push(...rows);
      for (const r of rows) bytes += Buffer.byteLength(r.message);
      left.push(...gaps(hole.from - 1, rows, hole.to, hole.seenAtMs));
    }
    holes = left;
    return { found, full: found.length >= batch || bytes >= maxBytes };
  };
  try {
    while (!o.signal.aborted) {
      if (read) {
        woken = false;
        const { found: late, full } = holes.length > 0 ? await fillHoles(Date.now()) : { found: [], full: false };
        // A full page of late lines goes alone: a step holds two pages at most.
        const rows = full ? [] : await deps.watch.readLines(dep.id, cursor, batch, o.sinceMs, o.maxBytes);
        if (rows.length > 0) {
          holes = [...holes, ...gaps(cursor, rows, undefined, Date.now())].slice(-MAX_HOLES);
          cursor = rows.at(-1)!.seq;
        }
        if (late.length > 0 || rows.length > 0) {
          yield { kind: "lines", rows: [...late, ...rows] };
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

/** The numbers missing after `afterSeq` among `rows` (ascending), up to `to` when given. */
function gaps(afterSeq: number, rows: readonly LogRow[], to: number | undefined, seenAtMs: number): Hole[] {
  const out: Hole[] = [];
  let prev = afterSeq;
  for (const r of rows) {
    if (r.seq > prev + 1) out.push({ from: prev + 1, to: r.seq - 1, seenAtMs });
    prev = r.seq;
  }
  if (to !== undefined && to > prev) out.push({ from: prev + 1, to, seenAtMs });
  return out;
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
