import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { errorAnswer, errorReply } from "./client-error";
import { lingeringClose } from "./lingering-close";

/**
 * RFC 9112 §3.2: a request with more than one Host line is answered 400.
 * Node's parser keeps the first and drops the rest without a word; which one
 * a request meant is a guess another proxy in the path may make differently.
 */
export function hasManyHosts(req: IncomingMessage): boolean {
  let hosts = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.toLowerCase() === "host" && ++hosts > 1) return true;
  return false;
}

const MESSAGE = ["VALIDATION_ERROR", "invalid header: Host appears more than once", [{ field: "host", message: "appears more than once" }]] as const;

/** The 400 for a request hasManyHosts refuses, whether it holds a response or a socket (an upgrade). */
export function refuseManyHosts(to: ServerResponse | Duplex) {
  if ("writeHead" in to) {
    const { status, headers, body } = errorAnswer(...MESSAGE);
    return void to.writeHead(status, headers).end(body);
  }
  to.write(errorReply(...MESSAGE));
  lingeringClose(to);
}
