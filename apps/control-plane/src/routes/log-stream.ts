import type { DeploymentRow, LogRow } from "@cm/db";
import { LOG_STREAM_END_EVENT, LOG_STREAM_KEEP_ALIVE_MS } from "@cm/protocol";
import type { Context } from "hono";
import type { Deps } from "../deps";
import { serverSentEvents } from "../http/sse";
import { followLogs } from "../services/log-follow";

export type LogStreamOptions = { tail: number; sinceMs?: number; lastEventId?: string };

/**
 * A deployment's log lines as Server-Sent Events: the tail first (or, with
 * Last-Event-ID, the lines after that one), then each line as it is stored, each
 * with its number as id (the highest sent, for a line stored late); `end` once the deployment has ended and its last lines
 * are out; a comment when nothing was sent for LOG_STREAM_KEEP_ALIVE_MS.
 */
export function streamLogs(c: Context, deps: Pick<Deps, "repos" | "watch" | "log">, dep: DeploymentRow, o: LogStreamOptions) {
  return serverSentEvents(c, deps.log.child({ deploymentId: dep.id }), "log stream", async (stream) => {
    const abort = new AbortController();
    stream.onAbort(() => abort.abort());
    // The id is the cursor a reconnect resumes after: a late line (stored after higher-numbered ones) does not move it back.
    let top = 0;
    const send = (r: LogRow) => {
      top = Math.max(top, r.seq);
      return stream.writeSSE({ id: String(top), data: JSON.stringify({ timestamp: r.ts, stream: r.stream, message: r.message }) });
    };
    let afterSeq: number;
    if (o.lastEventId !== undefined) afterSeq = top = Number(o.lastEventId);
    else {
      const rows = await deps.repos.logs.tail(dep.id, o.tail, o.sinceMs);
      for (const r of rows) await send(r);
      afterSeq = rows.at(-1)?.seq ?? 0;
      // No line yet: the cursor alone, so a reconnect resumes here rather than replaying a tail.
      if (rows.length === 0) await stream.write(`id: ${afterSeq}\n\n`);
    }
    let lastWriteMs = Date.now();
    for await (const step of followLogs(deps, dep, { afterSeq, sinceMs: o.sinceMs, signal: abort.signal })) {
      if (step.kind === "lines") {
        for (const r of step.rows) await send(r);
        lastWriteMs = Date.now();
      } else if (step.kind === "end") {
        await stream.writeSSE({ event: LOG_STREAM_END_EVENT, data: JSON.stringify({ status: step.status }) });
        return;
      } else if (Date.now() - lastWriteMs >= LOG_STREAM_KEEP_ALIVE_MS) {
        await stream.write(": keep-alive\n\n");
        lastWriteMs = Date.now();
      }
    }
  });
}
