import { randomUUID } from "node:crypto";
import http from "node:http";
import type { Duplex } from "node:stream";
import { ERROR_CODES, type ErrorCode } from "@cm/protocol";

type ClientError = Error & { code?: string; rawPacket?: Buffer };

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
  return function onClientError(err: ClientError, socket: Duplex & { bytesWritten?: number }) {
    if (socket.writable && (socket.bytesWritten ?? 0) === 0) {
      if (err.code === "HPE_HEADER_OVERFLOW") {
        const tooLong = requestLineTooLong(err.rawPacket, limitBytes);
        socket.write(
          errorReply(
            tooLong ? "URI_TOO_LONG" : "HEADERS_TOO_LARGE",
            tooLong ? `the URL is longer than ${limitBytes} bytes` : `the URL and headers together are larger than ${limitBytes} bytes`,
          ),
        );
      } else if (err.code !== "ECONNRESET") {
        const [status, reason] = err.code === "ERR_HTTP_REQUEST_TIMEOUT" ? [408, "Request Timeout"] : err.code === "HPE_CHUNK_EXTENSIONS_OVERFLOW" ? [413, "Payload Too Large"] : [400, "Bad Request"];
        socket.write(`HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\n\r\n`);
      }
    }
    socket.destroy(err);
  };
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
