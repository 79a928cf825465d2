import type { ServerResponse } from "node:http";
import type { Context } from "hono";
import type { SSEStreamingApi } from "hono/streaming";

/**
 * Writes one chunk of a stream and waits until its socket has taken it (the
 * Node adapter reads the next chunk only after `drain`), so a stream holds at
 * most the chunk in hand however slowly its client reads. A client that takes
 * nothing for `stallMs` has its connection closed: an unread stream would
 * otherwise keep its socket, its buffers and its place in the store for as long
 * as the client cares to stay. Answers false when the stream is over.
 */
export async function writePaced(c: Context, stream: SSEStreamingApi, chunk: string, stallMs: number): Promise<boolean> {
  if (stream.aborted || stream.closed) return false;
  let timer: NodeJS.Timeout | undefined;
  const stalled = await Promise.race([
    stream.write(chunk).then(() => false),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), stallMs);
    }),
  ]);
  clearTimeout(timer);
  // A socket that takes each chunk at once (a fast reader on loopback) never makes the write wait for I/O, and the
  // next page is read from the store in the same turn: a whole tail went out in one turn while /health waited 0.5 s.
  await new Promise((resolve) => setImmediate(resolve));
  if (stalled) {
    // The socket itself: ending the response would wait for the client to read what is queued.
    (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing?.destroy();
    stream.abort();
    return false;
  }
  return !stream.aborted;
}
