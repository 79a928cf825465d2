// Which lines of a `docker logs --tail n` read are new since the cursor. Pure.
//
// The agent reads logs by polling the end of the log rather than following it:
// Docker 20.10's follow skips and repeats lines when json-file rotates under a
// busy container, while a plain read is a consistent snapshot. The cursor line
// is found in the window by its exact nanosecond timestamp, so stdout and
// stderr lines written in the same microsecond are neither lost nor repeated.
import type { LogLine } from "../runtime/types";
import { dockerTsToNs } from "./docker-ts";

export type WindowResult = { kind: "new"; lines: LogLine[] } | { kind: "widen"; estimatedLines: number };

/**
 * `window` is what a read of the last `requested` lines returned. "widen" means
 * the cursor lies before the window: read more lines and ask again.
 */
export function newLinesAfter(window: readonly LogLine[], requested: number, cursorTs: string): WindowResult {
  for (let i = window.length - 1; i >= 0; i--) {
    if (window[i]!.dockerTimestamp === cursorTs) return { kind: "new", lines: window.slice(i + 1) };
  }
  const cursorNs = dockerTsToNs(cursorTs);
  const wholeLog = window.length < requested;
  const firstNs = window[0] ? dockerTsToNs(window[0].dockerTimestamp) : undefined;
  // The cursor line is not there: rotated away, from an older container, or in the window's span but unmatched.
  if (wholeLog || cursorNs === undefined || (firstNs !== undefined && firstNs <= cursorNs)) return { kind: "new", lines: linesAfterNs(window, cursorNs) };
  return { kind: "widen", estimatedLines: estimateLinesSince(window, cursorNs) };
}

/**
 * How many lines a read must reach back to include the cursor, from the pace of
 * the lines in the window: a burst of 200,000 lines is then found in one more
 * read instead of many ever wider ones.
 */
function estimateLinesSince(window: readonly LogLine[], cursorNs: bigint): number {
  const firstNs = dockerTsToNs(window[0]?.dockerTimestamp ?? "");
  const lastNs = dockerTsToNs(window[window.length - 1]?.dockerTimestamp ?? "");
  if (firstNs === undefined || lastNs === undefined || lastNs <= firstNs) return window.length * 4;
  const perNs = window.length / Number(lastNs - firstNs);
  return Math.ceil(window.length + Number(firstNs - cursorNs) * perNs * 1.2);
}

/** Lines stamped after the cursor; lines without a readable timestamp cannot be placed and are dropped. */
export function linesAfterNs(lines: readonly LogLine[], cursorNs: bigint | undefined): LogLine[] {
  if (cursorNs === undefined) return [...lines];
  return lines.filter((line) => {
    const ns = dockerTsToNs(line.dockerTimestamp);
    return ns !== undefined && ns > cursorNs;
  });
}
