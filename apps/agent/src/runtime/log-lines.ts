// Pure pieces of log handling: splitting text into lines across chunk
// boundaries and reading the timestamp Docker puts before each line.
import type { OutputStream } from "./docker-frames";
import type { LogLine } from "./types";

export interface LineSplitter {
  /** Complete lines in this piece of text, without their line endings. */
  push(text: string): string[];
  /** The unterminated rest, if any, as a last line. */
  flush(): string[];
}

export function createLineSplitter(): LineSplitter {
  let partial = "";
  return {
    push(text) {
      const pieces = (partial + text).split("\n");
      partial = pieces.pop() ?? "";
      return pieces.map(stripCarriageReturn);
    },
    flush() {
      const rest = partial;
      partial = "";
      return rest === "" ? [] : [stripCarriageReturn(rest)];
    },
  };
}

function stripCarriageReturn(line: string): string {
  return line.endsWith("\r") ? line.slice(0, -1) : line;
}

// RFC 3339 with up to nanoseconds, as Docker writes with `timestamps: true`:
// "2024-05-01T12:34:56.123456789Z" (always UTC for the json-file driver).
const DOCKER_TIMESTAMP = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/;

/** ISO 8601 with milliseconds (what Date can hold), or undefined when it is not a Docker timestamp. */
export function dockerTimestampToIso(dockerTimestamp: string): string | undefined {
  const match = DOCKER_TIMESTAMP.exec(dockerTimestamp);
  if (!match) return undefined;
  const [, seconds = "", fraction = "", zone = ""] = match;
  const milliseconds = fraction.padEnd(3, "0").slice(0, 3);
  // Docker writes UTC: the ISO form is then the text itself, without a Date per line
  // (log shipping decodes 100,000 lines a second). Date still checks it is a real time.
  if (zone === "Z" && isPlausibleUtc(seconds)) return `${seconds}.${milliseconds}Z`;
  const date = new Date(`${seconds}.${milliseconds}${zone}`);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

/** Month 01-12, day 01-31, hour 00-23, minute and second 00-59 ("YYYY-MM-DDTHH:MM:SS"). */
function isPlausibleUtc(seconds: string): boolean {
  const month = Number(seconds.slice(5, 7));
  const day = Number(seconds.slice(8, 10));
  return month >= 1 && month <= 12 && day >= 1 && day <= 31 && seconds.slice(11, 13) < "24" && seconds.slice(14, 16) < "60" && seconds.slice(17, 19) < "60";
}

/**
 * A line as Docker sends it with `timestamps: true`: "<timestamp> <message>".
 * A line without a readable timestamp keeps its whole text, stamped with `receivedAt`.
 */
export function parseTimestampedLine(line: string, stream: OutputStream, receivedAt: Date | (() => Date) = () => new Date()): LogLine {
  const space = line.indexOf(" ");
  const candidate = space < 0 ? line : line.slice(0, space);
  const timestamp = dockerTimestampToIso(candidate);
  if (timestamp === undefined) {
    const at = typeof receivedAt === "function" ? receivedAt() : receivedAt;
    return { timestamp: at.toISOString(), dockerTimestamp: "", stream, message: line };
  }
  return { timestamp, dockerTimestamp: candidate, stream, message: space < 0 ? "" : line.slice(space + 1) };
}

/** Docker's `since` as "seconds.nanoseconds", the form its API parses without loss. */
export function toDockerSince(date: Date): string {
  const ms = date.getTime();
  const seconds = Math.floor(ms / 1000);
  const nanos = (ms - seconds * 1000) * 1_000_000;
  return `${seconds}.${String(nanos).padStart(9, "0")}`;
}
