import { randomUUID } from "node:crypto";
import http from "node:http";
import type { Duplex } from "node:stream";
import { ERROR_CODES, type ErrorCode } from "@cm/protocol";

type ClientError = Error & { code?: string; rawPacket?: Buffer };
/** Node's own field on a server socket: the response it is writing, if any (null between requests on a kept-alive connection). */
type InFlight = { _httpMessage?: { headersSent?: boolean } | null };

// A request line's method and the start of its target: what tells a URL from a header value.
const REQUEST_LINE_START = /^[A-Z][A-Z-]* (?:\/|https?:\/\/|\*)/;

/** How long a refused connection is read from (and what it sends dropped) so that the answer reaches the client. */
const LINGER_MS = 5_000;

/**
 * Node's HTTP parser refuses a request whose URL and headers pass its limit
 * (16 KiB) before the app sees it, with an empty 431. This answers it in the
 * one error shape instead: 414 when the request line alone is past the limit,
 * 431 otherwise. Every other parse failure gets Node's own answer, as without
 * a 'clientError' listener.
 */
export function answerClientError(limitBytes = http.maxHeaderSize) {
  // The parser reports again as more of the refused request arrives: answered once.
  const answered = new WeakSet<Duplex>();
  return function onClientError(err: ClientError, socket: Duplex & InFlight) {
    if (answered.has(socket)) return;
    answered.add(socket);
    const reply = replyTo(err, limitBytes);
    // A reply written into a response already under way would corrupt it (Node makes the same check).
    if (!reply || !socket.writable || socket._httpMessage?.headersSent) return void socket.destroy(err);
    // Closing at once, with the rest of the request unread, makes the kernel
    // send a reset that can destroy the answer before the client reads it:
    // end our side, go on reading (the parser drops it), then close.
    socket.end(reply);
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    socket.once("close", () => clearTimeout(timer));
  };
}

function replyTo(err: ClientError, limitBytes: number): string | undefined {
  if (err.code === "ECONNRESET") return undefined;
  if (err.code === "HPE_HEADER_OVERFLOW") {
    return requestLineTooLong(err.rawPacket, limitBytes)
      ? errorReply("URI_TOO_LONG", `the URL is longer than ${limitBytes} bytes`)
      : errorReply("HEADERS_TOO_LARGE", `the URL and headers together are larger than ${limitBytes} bytes`);
  }
  const [status, reason] =
    err.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? [408, "Request Timeout"]
      : err.code === "HPE_CHUNK_EXTENSIONS_OVERFLOW"
        ? [413, "Payload Too Large"]
        : [400, "Bad Request"];
  return `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\n\r\n`;
}

/** Whether the bytes start a request line that has no end within the limit (so its URL is past it). */
function requestLineTooLong(raw: Buffer | undefined, limitBytes: number): boolean {
  if (!raw || !REQUEST_LINE_START.test(raw.subarray(0, 32).toString("latin1"))) return false;
  const end = raw.indexOf("\r\n");
  return end < 0 || end >= limitBytes;
}

function errorReply(code: ErrorCode, message: string): string {
  const { status } = ERROR_CODES[code];
  const requestId = `req_${randomUUID()}`;
  const body = JSON.stringify({ error: { code, message, requestId } });
  return [
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}`,
    "Content-Type: application/json",
    `Content-Length: ${Buffer.byteLength(body)}`,
    `X-Request-Id: ${requestId}`,
    "Connection: close",
    "",
    body,
  ].join("\r\n");
}
