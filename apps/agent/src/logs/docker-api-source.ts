// Reads a container's log through Docker's API: the last n lines, n sized to
// reach just past the cursor (see log-window.ts). Docker reads every line it
// returns again, so this costs the engine more than the json-file source.
import type { LogCursor } from "@cm/protocol";
import type { LogClient } from "../runtime/container-runtime";
import type { LogLine } from "../runtime/types";
import { resumeSince } from "./docker-ts";
import type { LogSource } from "./log-source";
import { newLinesAfter } from "./log-window";

const MIN_WINDOW_LINES = 500;
const MAX_WINDOW_LINES = 200_000;
/** a wider tail read is tried up to this size before a `since` read */
const MAX_TAIL_RETRY_LINES = 100_000;

export class DockerApiLogSource implements LogSource {
  readonly kind = "docker-api";
  private windowLines = MIN_WINDOW_LINES;

  constructor(
    private readonly containerId: string,
    private readonly runtime: LogClient,
  ) {}

  async readNew(after: LogCursor): Promise<LogLine[]> {
    const cursorTs = after.dockerTs;
    if (cursorTs === null) return this.read({});
    let requested = this.windowLines;
    let result = newLinesAfter(await this.read({ tail: requested }), requested, cursorTs);
    if (result.kind === "widen") {
      // Reads that miss are wasted work while the container writes on: one cheap
      // wider try, then a `since` read, which costs a scan of the log but always lands.
      requested = Math.max(requested * 4, result.estimatedLines * 2);
      if (requested <= MAX_TAIL_RETRY_LINES) result = newLinesAfter(await this.read({ tail: requested }), requested, cursorTs);
      if (result.kind === "widen") result = newLinesAfter(await this.read({ since: resumeSince(cursorTs) }), Infinity, cursorTs);
    }
    const lines = result.kind === "new" ? result.lines : [];
    // The next read should reach back just past the cursor: what this one found, plus a margin.
    this.windowLines = Math.min(MAX_WINDOW_LINES, Math.max(MIN_WINDOW_LINES, Math.ceil(lines.length * 1.2) + 200));
    return lines;
  }

  async close(): Promise<void> {}

  private async read(options: { tail?: number; since?: Date }): Promise<LogLine[]> {
    const lines: LogLine[] = [];
    const handle = await this.runtime.logs(this.containerId, { follow: false, ...options }, (line) => lines.push(line));
    await handle.done;
    return lines;
  }
}
