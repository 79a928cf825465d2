import type { LogEntry } from "@cm/sdk";

/**
 * The lines a log view holds: the newest `max` at most (the API keeps 10,000 per
 * deployment), in seq order, each seq once. Pushing is cheap (an array push, trimmed in
 * blocks rather than a shift per line), so a thousand lines a second cost nothing here;
 * the view reads it once per animation frame.
 */
export class LogBuffer {
  readonly max: number;
  #lines: LogEntry[] = [];
  #lastSeq = -1;
  /** Bumped on every line taken: a view knows whether to draw again, and how many came since it looked. */
  version = 0;
  /** Lines dropped off the front to stay under max. */
  dropped = 0;

  constructor(max = 10_000) {
    this.max = max;
  }

  /** Adds a line unless already held (a resumed stream, or a follow started again after a restart, repeats none by seq). */
  push(line: LogEntry): boolean {
    if (line.seq <= this.#lastSeq) return false;
    this.#lastSeq = line.seq;
    this.#lines.push(line);
    // Trim in blocks of a tenth: one splice per thousand lines rather than a shift per line.
    if (this.#lines.length > this.max + Math.ceil(this.max / 10)) {
      const cut = this.#lines.length - this.max;
      this.#lines.splice(0, cut);
      this.dropped += cut;
    }
    this.version++;
    return true;
  }

  /** The lines held, the newest max at most, oldest first. */
  lines(): readonly LogEntry[] {
    return this.#lines.length > this.max ? this.#lines.slice(this.#lines.length - this.max) : this.#lines;
  }

  get length(): number {
    return Math.min(this.#lines.length, this.max);
  }

  /** The lines as a text file: "timestamp stream message" each. */
  toText(): string {
    return this.lines()
      .map((l) => `${l.timestamp} ${l.stream} ${l.message}\n`)
      .join("");
  }
}
