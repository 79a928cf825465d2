import type { ServerResponse } from "node:http";
import { LOG_STREAM_ERROR_EVENT } from "@cm/protocol";
import type { Context } from "hono";
import { type SSEStreamingApi, streamSSE } from "hono/streaming";
import type { Logger } from "../services/logger";
import type { StreamHold } from "../services/stream-holds";

/** How long a stream cut off for its sign-in waits for its client to read the error event before it is dropped. */
const CUT_FLUSH_MS = 5_000;

/**
 * Hono's streamSSE, but a failure inside the stream reaches the client as an
 * `error` event in the API's error shape (INTERNAL_ERROR with the request id),
 * then the stream ends and a reconnect resumes it. Left to Hono, the event
 * would carry the error's own message: a database's words, for anyone.
 *
 * A route that set `streamHold` has its stream ended when the sign-in that
 * opened it is over (an `error` event, UNAUTHORIZED or TOKEN_EXPIRED, then the
 * end), and its slot given back whenever it ends.
 */
export function serverSentEvents(c: Context, log: Logger, what: string, body: (stream: SSEStreamingApi) => Promise<void>) {
  const hold: StreamHold | undefined = c.get("streamHold");
  return streamSSE(c, async (stream) => {
    if (hold) void hold.ended.then((why) => cutOff(c, stream, { ...why, requestId: c.get("requestId") ?? "unknown" }));
    try {
      await body(stream);
    } catch (err) {
      log.error(`${what} failed`, { err });
      if (stream.aborted || stream.closed) return;
      const error = { code: "INTERNAL_ERROR", message: `the ${what} failed on our side; reconnect to resume it`, requestId: c.get("requestId") ?? "unknown" };
      await stream.writeSSE({ event: LOG_STREAM_ERROR_EVENT, data: JSON.stringify({ error }) }).catch(() => {});
    } finally {
      hold?.release();
    }
  });
}

/**
 * Ends a stream with an `error` event: nothing the body writes after it goes
 * out, and the body is aborted once the event has been read (a write resolves
 * when the reader took it; aborting earlier would drop it). A client that has
 * not read it within CUT_FLUSH_MS loses its connection: its sign-in is over.
 */
async function cutOff(c: Context, stream: SSEStreamingApi, error: { code: string; message: string; requestId: string }) {
  if (stream.aborted || stream.closed) return;
  const write = stream.write.bind(stream);
  stream.write = async () => stream;
  let timer: NodeJS.Timeout | undefined;
  const unread = await Promise.race([
    write(`event: ${LOG_STREAM_ERROR_EVENT}\ndata: ${JSON.stringify({ error })}\n\n`).then(() => false),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), CUT_FLUSH_MS);
    }),
  ]);
  clearTimeout(timer);
  if (unread) (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing?.destroy();
  stream.abort();
}
