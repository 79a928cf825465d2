import type { DeploymentRow, LogRow, Repos } from "@cm/db";
import type { EventBus } from "./events";
import type { Clock } from "./ids";
import type { Logger } from "./logger";

/** The deployment as it is now; undefined once it is deleted. */
export type RowListener = (row: DeploymentRow | undefined) => void;

export type DeploymentWatchOptions = {
  repos: Repos;
  events: EventBus;
  log: Logger;
  /** Whose period the fallback read keeps. */
  clock: Clock;
  /** A notice without the row waits this long for others before one read answers them all (default 100 ms). */
  coalesceMs?: number;
  /**
   * The watched deployments are read again this often, all in one query, and the
   * log followers of those with lines stored since woken: for changes and lines
   * stored where no notice reaches (another replica, a lost wake-up) (default 1 s).
   */
  fallbackMs?: number;
};

type Watched = {
  rows: Set<RowListener>;
  lines: Set<() => void>;
  /** Reads of lines under way, by what they ask: followers at the same line share one. */
  lineReads: Map<string, Promise<LogRow[]>>;
  timer?: NodeJS.Timeout;
  reading: boolean;
  again: boolean;
  gen: number;
};

/** Deployments one fallback statement reads at most: a replica following more makes one statement per this many. */
const FALLBACK_IDS_PER_READ = 5_000;
/** The largest line id the store's column holds (a 32-bit integer on PostgreSQL): "after it" counts nothing. */
const NO_LINE_ID = 2 ** 31 - 1;

/**
 * What the streams of one deployment hear: its row when it changes, and a wake-up
 * when its log lines are stored. The bus gets one listener per event however many
 * follow; a burst of notices without the row (charges, endpoint reports, pull
 * progress) costs one read per deployment, and the followers a line wakes read it
 * with one query, not one each. What no notice brought is found by one read
 * of all the watched deployments each fallback period (see fallback()).
 */
export class DeploymentWatch {
  private readonly watched = new Map<string, Watched>();
  private readonly coalesceMs: number;
  private readonly fallbackMs: number;
  private stopFallback: (() => void) | undefined;
  private fallbackRunning = false;
  /**
   * The store's newest line id at the last two fallback reads, newest last. A line
   * id is taken when its insert starts and seen when it commits, so a line may
   * appear under an id below the newest already seen: each read counts the lines
   * after the id of the read before last, and compares with what the last read
   * counted after that same id. Only a line whose insert took more than a whole
   * period to commit is missed so; the next line stored for its deployment
   * wakes its followers, who read on from their cursor and find both.
   */
  private newestLogIds: number[] = [];
  /** Per watched deployment: its lines counted after newestLogIds' last id at the last read. */
  private countedAfterLast = new Map<string, number>();
  /** Fallback statements made, for tests and /metrics: one a period per FALLBACK_IDS_PER_READ deployments watched. */
  fallbackReads = 0;

  constructor(private readonly o: DeploymentWatchOptions) {
    this.coalesceMs = o.coalesceMs ?? 100;
    this.fallbackMs = o.fallbackMs ?? 1_000;
    o.events.on("deployment-changed", (row) => {
      const w = this.watched.get(row.id);
      if (!w) return;
      // A read under way may have started before this change: its answer is dropped and read again.
      w.gen++;
      this.deliver(w, row.deletedAt === null ? row : undefined);
    });
    o.events.on("deployment-touched", (id) => this.refresh(id));
    o.events.on("logs-stored", (id) => {
      const w = this.watched.get(id);
      if (!w) return;
      // Reads under way may have started before these lines were stored: the woken ask again.
      this.wakeLines(w);
    });
  }

  /** Calls `fn` with the row each time it changes (or may have: listeners compare). */
  onRow(id: string, fn: RowListener): () => void {
    const w = this.entry(id);
    w.rows.add(fn);
    return () => this.leave(id, w, () => w.rows.delete(fn));
  }

  /** Calls `fn` each time lines of the deployment are stored here. */
  onLines(id: string, fn: () => void): () => void {
    const w = this.entry(id);
    w.lines.add(fn);
    return () => this.leave(id, w, () => w.lines.delete(fn));
  }

  /** Lines after `afterSeq` (repos.logs.after), the query shared with whoever asks the same while it runs. */
  readLines(id: string, afterSeq: number, limit: number, sinceMs?: number, maxBytes?: number): Promise<LogRow[]> {
    const w = this.watched.get(id);
    if (!w) return this.o.repos.logs.after(id, afterSeq, limit, sinceMs, maxBytes);
    const key = `${afterSeq} ${limit} ${sinceMs ?? ""} ${maxBytes ?? ""}`;
    let read = w.lineReads.get(key);
    if (!read) {
      const started = this.o.repos.logs.after(id, afterSeq, limit, sinceMs, maxBytes);
      read = started;
      w.lineReads.set(key, started);
      const done = () => {
        if (w.lineReads.get(key) === started) w.lineReads.delete(key);
      };
      started.then(done, done);
    }
    return read;
  }

  /** Reads the row soon and hands it to its row listeners; notices within coalesceMs share the read. */
  refresh(id: string) {
    const w = this.watched.get(id);
    if (!w || w.rows.size === 0 || w.timer) return;
    w.timer = setTimeout(() => {
      w.timer = undefined;
      void this.read(id, w);
    }, this.coalesceMs);
    w.timer.unref();
  }

  private async read(id: string, w: Watched) {
    if (w.reading) {
      w.again = true;
      return;
    }
    w.reading = true;
    try {
      for (;;) {
        w.again = false;
        const gen = w.gen;
        const row = await this.o.repos.deployments.get(id);
        if (gen === w.gen) this.deliver(w, row);
        else w.again = true;
        if (!w.again || this.watched.get(id) !== w) return;
      }
    } catch (err) {
      this.o.log.warn("deployment watch: read failed", { deploymentId: id, err });
    } finally {
      w.reading = false;
    }
  }

  private deliver(w: Watched, row: DeploymentRow | undefined) {
    for (const fn of w.rows) fn(row);
  }

  private entry(id: string): Watched {
    let w = this.watched.get(id);
    if (!w) {
      w = { rows: new Set(), lines: new Set(), lineReads: new Map(), reading: false, again: false, gen: 0 };
      this.watched.set(id, w);
      this.stopFallback ??= this.o.clock.every(this.fallbackMs, () => void this.fallback());
    }
    return w;
  }

  /**
   * One read for every watched deployment: their rows, handed to their row
   * listeners, and whether lines were stored for them since the last read,
   * waking only those deployments' log followers. The first read after the watch
   * was idle wakes every follower: what was stored before it is not known.
   */
  private async fallback() {
    if (this.fallbackRunning) return;
    this.fallbackRunning = true;
    try {
      const ids = [...this.watched.keys()];
      const gens = new Map(ids.map((id) => [id, this.watched.get(id)!.gen]));
      const [older, last] = this.newestLogIds.length === 2 ? this.newestLogIds : [this.newestLogIds[0], this.newestLogIds[0]];
      const found = await this.readWatched(ids, older ?? NO_LINE_ID, last ?? NO_LINE_ID);
      const first = last === undefined;
      const counted = new Map<string, number>();
      const seen = new Set<string>();
      for (const { row, stored, storedNewer } of found.rows) {
        seen.add(row.id);
        counted.set(row.id, storedNewer);
        const w = this.watched.get(row.id);
        if (!w) continue;
        this.settle(row.id, w, gens.get(row.id), row.deletedAt === null ? row : undefined);
        if (first || stored > (this.countedAfterLast.get(row.id) ?? 0)) this.wakeLines(w);
      }
      // Gone from the store altogether (purged): deleted, as a read of it would say.
      for (const id of ids) {
        const w = this.watched.get(id);
        if (!seen.has(id) && w) this.settle(id, w, gens.get(id), undefined);
      }
      this.countedAfterLast = counted;
      if (found.newestLogId !== undefined) this.newestLogIds = [last ?? found.newestLogId, found.newestLogId];
    } catch (err) {
      this.o.log.warn("deployment watch: the fallback read failed", { err });
    } finally {
      this.fallbackRunning = false;
    }
  }

  /**
   * The fallback's statement, one per FALLBACK_IDS_PER_READ deployments (each id
   * is a bound parameter twice: SQLite and PostgreSQL bound those). The store's
   * newest line id is the least the statements saw: reading on from it is safe.
   */
  private async readWatched(ids: string[], afterLogId: number, newerThanLogId: number) {
    const rows: Array<{ row: DeploymentRow; stored: number; storedNewer: number }> = [];
    let newestLogId: number | undefined;
    for (let i = 0; i < ids.length; i += FALLBACK_IDS_PER_READ) {
      this.fallbackReads++;
      const part = await this.o.repos.deployments.watched(ids.slice(i, i + FALLBACK_IDS_PER_READ), afterLogId, newerThanLogId);
      rows.push(...part.rows);
      if (part.newestLogId !== undefined) newestLogId = Math.min(newestLogId ?? part.newestLogId, part.newestLogId);
    }
    return { rows, newestLogId };
  }

  /** Hands a row read for the fallback to its listeners, unless a change came while it was read: then reads it again. */
  private settle(id: string, w: Watched, gen: number | undefined, row: DeploymentRow | undefined) {
    if (gen === w.gen) this.deliver(w, row);
    else this.refresh(id);
  }

  /** All of the deployment's followers at once, so that their reads are shared; reads under way may predate the lines. */
  private wakeLines(w: Watched) {
    w.lineReads.clear();
    for (const fn of w.lines) fn();
  }

  private leave(id: string, w: Watched, remove: () => void) {
    remove();
    if (w.rows.size > 0 || w.lines.size > 0) return;
    clearTimeout(w.timer);
    if (this.watched.get(id) === w) this.watched.delete(id);
    if (this.watched.size === 0) {
      // Idle: the next watch starts over, its first read waking everyone.
      this.stopFallback?.();
      this.stopFallback = undefined;
      this.newestLogIds = [];
      this.countedAfterLast.clear();
    }
  }
}
