import type { DeploymentRow, LogRow } from "@cm/db";
import { LOG_STREAM_END_EVENT, LOG_STREAM_KEEP_ALIVE_MS } from "@cm/protocol";
import type { Context } from "hono";
import type { Deps } from "../deps";
import { writePaced } from "../http/paced-write";
import { serverSentEvents } from "../http/sse";
import { followLogs } from "../services/log-follow";

export type LogStreamOptions = { tail: number; sinceMs?: number; lastEventId?: string };

/**
 * What a stream reads from the store and writes at once: ten unread streams
 * that each read a 77 MB tail whole held 500 MB; a page is at most this much
 * text (about: a line stored late may join it) and this many lines.
 */
export const LOG_STREAM_PAGE_BYTES = 256 * 1024;
export const LOG_STREAM_PAGE_LINES = 1_000;

/**
 * A deployment's log lines as Server-Sent Events: the tail first (or, with
 * Last-Event-ID, the lines after that one), then each line as it is stored, each
 * with its number as id (the highest sent, for a line stored late); `end` once the deployment has ended and its last lines
 * are out; a comment when nothing was sent for LOG_STREAM_KEEP_ALIVE_MS. The tail
 * is read and written a page at a time, each page once the client took the last.
 */
export function streamLogs(c: Context, deps: Pick<Deps, "repos" | "watch" | "log" | "config">, dep: DeploymentRow, o: LogStreamOptions) {
  return serverSentEvents(c, deps.log.child({ deploymentId: dep.id }), "log stream", async (stream) => {
    const abort = new AbortController();
    stream.onAbort(() => abort.abort());
    // The id is the cursor a reconnect resumes after: a late line (stored after higher-numbered ones) does not move it back.
    let top = 0;
    const event = (r: LogRow) => {
      top = Math.max(top, r.seq);
      return `data: ${JSON.stringify({ timestamp: r.ts, stream: r.stream, message: r.message, seq: r.seq })}\nid: ${top}\n\n`;
    };
    const write = (chunk: string) => writePaced(c, stream, chunk, deps.config.LOG_STREAM_STALL_MS);
    let afterSeq: number;
    if (o.lastEventId !== undefined) afterSeq = top = Number(o.lastEventId);
    else {
      // The tail is followed from its first line like any backlog, so it too goes out a page at a time.
      const start = await deps.repos.logs.tailStart(dep.id, o.tail, o.sinceMs);
      afterSeq = start === undefined ? 0 : start - 1;
      // No line yet: the cursor alone, so a reconnect resumes here rather than replaying a tail.
      if (start === undefined && !(await write(`id: ${afterSeq}\n\n`))) return;
    }
    let lastWriteMs = Date.now();
    const steps = followLogs(deps, dep, { afterSeq, sinceMs: o.sinceMs, signal: abort.signal, batch: LOG_STREAM_PAGE_LINES, maxBytes: LOG_STREAM_PAGE_BYTES });
    for await (const step of steps) {
      if (step.kind === "lines") {
        if (!(await write(step.rows.map(event).join("")))) return;
        lastWriteMs = Date.now();
      } else if (step.kind === "end") {
        await write(`event: ${LOG_STREAM_END_EVENT}\ndata: ${JSON.stringify({ status: step.status })}\n\n`);
        return;
      } else if (Date.now() - lastWriteMs >= LOG_STREAM_KEEP_ALIVE_MS) {
        if (!(await write(": keep-alive\n\n"))) return;
        lastWriteMs = Date.now();
      }
    }
  });
}
