import { randomUUID } from "node:crypto";
import http from "node:http";
import type { Duplex } from "node:stream";
import { ERROR_CODES, type ErrorCode } from "@cm/protocol";
import { lingeringClose } from "./lingering-close";

type ClientError = Error & { code?: string; rawPacket?: Buffer };
/** Node's own field on a server socket: the response it is writing, if any (null between requests on a kept-alive connection). */
type InFlight = { _httpMessage?: { headersSent?: boolean } | null };

// A request line's method and the start of its target: what tells a URL from a header value.
const REQUEST_LINE_START = /^[A-Z][A-Z-]* (?:\/|https?:\/\/|\*)/;

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
    // The rest of the request is still coming: closed at once, its answer could be lost to a reset.
    socket.write(reply);
    lingeringClose(socket);
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

/** A response in the API's one error shape that closes the connection, for where no app answers (Node's parser, the listener before the app). */
export function errorAnswer(code: ErrorCode, message: string, details?: unknown) {
  const { status } = ERROR_CODES[code];
  const requestId = `req_${randomUUID()}`;
  const body = JSON.stringify({ error: { code, message, requestId, ...(details !== undefined ? { details } : {}) } });
  const headers = { "Content-Type": "application/json", "Content-Length": String(Buffer.byteLength(body)), "X-Request-Id": requestId, Connection: "close" };
  return { status, headers, body };
}

/** errorAnswer as the bytes of a whole response, for a socket no HTTP response object holds. */
export function errorReply(code: ErrorCode, message: string, details?: unknown): string {
  const { status, headers, body } = errorAnswer(code, message, details);
  return [`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), "", body].join("\r\n");
}
