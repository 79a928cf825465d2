import type { DeploymentRow, LogRow, Repos } from "@cm/db";
import type { EventBus } from "./events";
import type { Logger } from "./logger";

/** The deployment as it is now; undefined once it is deleted. */
export type RowListener = (row: DeploymentRow | undefined) => void;

export type DeploymentWatchOptions = {
  repos: Repos;
  events: EventBus;
  log: Logger;
  /** A notice without the row waits this long for others before one read answers them all (default 100 ms). */
  coalesceMs?: number;
  /**
   * A watched deployment is read again, and its log followers woken, this often: for
   * changes and lines stored where no notice reaches (another replica) (default 1 s).
   */
  fallbackMs?: number;
};

type Watched = {
  rows: Set<RowListener>;
  lines: Set<() => void>;
  /** Reads of lines under way, by what they ask: followers at the same line share one. */
  lineReads: Map<string, Promise<LogRow[]>>;
  timer?: NodeJS.Timeout;
  fallback?: NodeJS.Timeout;
  reading: boolean;
  again: boolean;
  gen: number;
};

/**
 * What the streams of one deployment hear: its row when it changes, and a wake-up
 * when its log lines are stored. The bus gets one listener per event however many
 * follow; a burst of notices without the row (charges, endpoint reports, pull
 * progress) costs one read per deployment, and the followers a line wakes read it
 * with one query, not one each.
 */
export class DeploymentWatch {
  private readonly watched = new Map<string, Watched>();
  private readonly coalesceMs: number;
  private readonly fallbackMs: number;

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
      w.lineReads.clear();
      for (const fn of w.lines) fn();
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
      const entry = w;
      w.fallback = setInterval(() => {
        this.refresh(id);
        // All of the deployment's followers at once, so that their reads are shared.
        for (const fn of entry.lines) fn();
      }, this.fallbackMs);
      w.fallback.unref();
      this.watched.set(id, entry);
    }
    return w;
  }

  private leave(id: string, w: Watched, remove: () => void) {
    remove();
    if (w.rows.size > 0 || w.lines.size > 0) return;
    clearInterval(w.fallback);
    clearTimeout(w.timer);
    if (this.watched.get(id) === w) this.watched.delete(id);
  }
}
