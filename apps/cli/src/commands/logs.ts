import type { LogEntry } from "@cm/sdk";
import { intFlag, type Run, str, UsageError } from "../args";
import { printable } from "../output";

export const logs: Run = async (ctx, { args, flags }) => {
  const id = args[0]!;
  const tail = intFlag(flags, "tail");
  const since = parseSince(str(flags, "since"));
  const print = (line: LogEntry) => {
    if (ctx.json) return ctx.out.jsonLine(line);
    // As docker logs -t: the time the container wrote it (RFC 3339, as Docker stamps it), a space, the line.
    const stamp = flags.timestamps ? `${printable(line.timestamp)} ` : "";
    (line.stream === "stderr" ? process.stderr : process.stdout).write(`${stamp}${line.message}\n`);
  };
  if (!flags.follow) {
    const answer = await ctx.client.deployments.logs(id, { tail, since });
    if (ctx.json) return ctx.out.json(answer);
    for (const line of answer.logs) print(line);
    // One answer holds a few MiB of text at most; the stream sends a tail of any size.
    if (answer.truncated) ctx.out.note(`older lines were left out: they hold more text than one answer carries; 'cm logs ${id} -f' reads them all`);
    return;
  }
  // --json with -f: one JSON log entry a line, as they come.
  for await (const line of ctx.client.deployments.follow(id, { tail, since, signal: ctx.signal })) print(line);
};

/** ISO 8601, or a duration ago: 90s, 10m, 2h, 1d. */
export function parseSince(value: string | undefined, now = Date.now()): string | undefined {
  if (value === undefined) return undefined;
  const ago = /^(\d+)(s|m|h|d)$/.exec(value);
  if (ago) return new Date(now - Number(ago[1]) * { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[ago[2] as "s"]).toISOString();
  if (/^\d{4}-\d{2}-\d{2}T/.test(value) && !Number.isNaN(Date.parse(value))) return new Date(Date.parse(value)).toISOString();
  throw new UsageError(`--since takes an ISO 8601 time (2026-01-31T12:00:00Z) or a duration ago (10m, 2h), not ${JSON.stringify(value)}`);
}
