// Docker's log timestamps as exact numbers. They carry nanoseconds, with trailing
// zeros trimmed ("…:56.1234Z"), so neither string order nor Date (milliseconds)
// can tell two of them apart reliably; BigInt nanoseconds since the epoch can.

const DOCKER_TS = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/;

/** Nanoseconds since the epoch, or undefined when the text is not an RFC 3339 timestamp. */
export function dockerTsToNs(ts: string): bigint | undefined {
  const match = DOCKER_TS.exec(ts);
  if (!match) return undefined;
  const [, seconds = "", fraction = "", zone = ""] = match;
  const ms = Date.parse(`${seconds}${zone}`);
  if (Number.isNaN(ms)) return undefined;
  return BigInt(ms) * 1_000_000n + BigInt(fraction.padEnd(9, "0"));
}

/**
 * The `since` to ask Docker for when resuming after `ts`: its whole second, since
 * Docker's json-file reader only honours whole seconds reliably. The caller drops
 * the lines of that second that are not after `ts`.
 */
export function resumeSince(ts: string | null): Date | undefined {
  if (ts === null) return undefined;
  const ns = dockerTsToNs(ts);
  if (ns === undefined) return undefined;
  return new Date(Number(ns / 1_000_000_000n) * 1000);
}
