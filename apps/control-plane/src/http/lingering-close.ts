import type { Duplex } from "node:stream";

/** A closing connection is read from for this long at most... */
export const LINGER_MAX_MS = 30_000;
/** ...and for this long after the last byte came... */
export const LINGER_IDLE_MS = 5_000;
/** ...and no further than this many bytes (nginx's lingering close, with a byte bound beside its times). */
export const LINGER_MAX_BYTES = 8 * 1024 * 1024;

const lingering = new WeakSet<Duplex>();
/** What lingerWhenClosed asks of each socket: whether its present request's body is still coming. */
const unreadOf = new WeakMap<Duplex, () => boolean>();

/**
 * Ends a connection whose client may still be sending (a body that was
 * refused, or never read): our side ends after what was written, and what
 * arrives until the client hangs up is read and dropped, within the bounds
 * above. Closing with unread bytes makes the kernel reset the connection, and
 * the reset can destroy the answer before the client reads it (a 413 for a
 * 2 MiB body was lost so 14 times in 20).
 */
export function lingeringClose(socket: Duplex) {
  if (socket.destroyed || lingering.has(socket)) return;
  lingering.add(socket);
  // The client has sent all it will: nothing is left to read.
  if (socket.readableEnded) return void socket.end(() => socket.destroy());
  let bytes = 0;
  const done = () => socket.destroy();
  const total = setTimeout(done, LINGER_MAX_MS);
  let idle = setTimeout(done, LINGER_IDLE_MS);
  total.unref();
  idle.unref();
  // From here on only this reads what the client sends: no parser acts on a request after the last one answered.
  socket.removeAllListeners("data");
  socket.on("data", (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > LINGER_MAX_BYTES) return done();
    clearTimeout(idle);
    idle = setTimeout(done, LINGER_IDLE_MS);
    idle.unref();
  });
  socket.once("end", done);
  socket.once("close", () => {
    clearTimeout(total);
    clearTimeout(idle);
  });
  socket.end();
  socket.resume();
}

/**
 * Makes every close Node's HTTP server decides on (a response that says
 * Connection: close, @hono/node-server giving up on draining a body) a
 * lingering one while `unread()` says the client may still be sending: both
 * call the socket's destroySoon, which Node's own closes at once, unread bytes
 * and all. Otherwise Node's own close, at once.
 */
export function lingerWhenClosed(socket: Duplex & { destroySoon?: () => void }, unread: () => boolean) {
  // Called for every request on the connection: the socket's method is replaced once, the question each time.
  if (!unreadOf.has(socket)) {
    const destroySoon = socket.destroySoon;
    socket.destroySoon = () => (unreadOf.get(socket)?.() ? lingeringClose(socket) : destroySoon?.call(socket));
  }
  unreadOf.set(socket, unread);
}
