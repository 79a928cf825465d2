import type { Context } from "hono";
import { type SSEStreamingApi, streamSSE } from "hono/streaming";
import type { Logger } from "../services/logger";

/** The event a stream's failure is told in; its data is the API's one error shape. */
export const STREAM_ERROR_EVENT = "error";

/**
 * Hono's streamSSE, but a failure inside the stream reaches the client as an
 * `error` event in the API's error shape (INTERNAL_ERROR with the request id),
 * then the stream ends and a reconnect resumes it. Left to Hono, the event
 * would carry the error's own message: a database's words, for anyone.
 */
export function serverSentEvents(c: Context, log: Logger, what: string, body: (stream: SSEStreamingApi) => Promise<void>) {
  return streamSSE(c, async (stream) => {
    try {
      await body(stream);
    } catch (err) {
      log.error(`${what} failed`, { err });
      if (stream.aborted || stream.closed) return;
      const error = { code: "INTERNAL_ERROR", message: `the ${what} failed on our side; reconnect to resume it`, requestId: c.get("requestId") ?? "unknown" };
      await stream.writeSSE({ event: STREAM_ERROR_EVENT, data: JSON.stringify({ error }) }).catch(() => {});
    }
  });
}
