// HTTP/1.1 message framing for the byte relay (relay.ts): where a head ends,
// what it says, and how long the body after it is, without decoding the body.
// Pure functions and one small state machine; the relay does the I/O.
//
// Anything this module finds ambiguous (a request with both Content-Length and
// Transfer-Encoding, folded header lines, a bare CR or LF) is refused rather
// than guessed at: the relay then hands the connection to Node's HTTP server,
// whose strict parser answers it. Two parsers that disagree on where a message
// ends are how requests get smuggled past a proxy.

import { METHODS as METHODS_NODE_KNOWS } from "node:http";
import { forwardedResponseField, HOP_BY_HOP } from "./headers";

export type Field = [name: string, value: string, lowerName: string];
/**
 * A parsed head. The headers that decide framing and forwarding are gathered
 * in the one pass over the lines, lowercased and split at commas: a head is
 * parsed for every request, and looking them up field by field again was a
 * measurable share of the gateway's CPU.
 */
export type Head = {
  line: string;
  fields: Field[];
  connection: string[];
  transferEncoding: string[];
  contentLength: string[];
  hosts: string[];
  upgrade: string | undefined;
};
export type RequestHead = Head & { method: string; target: string; version: string };
export type ResponseHead = Head & { status: number; version: string };

/** Heads larger than this are left to Node's HTTP server (which answers 431), as its own default limit. */
export const MAX_HEAD_BYTES = 16 * 1024;

const CRLFCRLF = Buffer.from("\r\n\r\n");
// A field line: a token, a colon, a value with no control character but HTAB
// (so no obs-fold, no bare CR or LF, no NUL a container's parser may cut at).
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what this refuses
const FIELD = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*([^\x00-\x08\x0a-\x1f\x7f]*?)[ \t]*$/;

/** The offset just past the head's blank line, or -1 while it is incomplete. */
export function headEnd(buf: Buffer, from = 0): number {
  const i = buf.indexOf(CRLFCRLF, from);
  return i < 0 ? -1 : i + 4;
}

const list = (v: string) => {
  const out: string[] = [];
  for (const t of v.split(",")) {
    const x = t.trim().toLowerCase();
    if (x) out.push(x);
  }
  return out;
};

function parseFields(text: string): Head | undefined {
  const lines = text.split("\r\n");
  const line = lines[0]!;
  if (/[\r\n]/.test(line)) return undefined;
  const h: Head = { line, fields: [], connection: [], transferEncoding: [], contentLength: [], hosts: [], upgrade: undefined };
  // The last two lines are the blank ones closing the head.
  for (let i = 1; i < lines.length - 2; i++) {
    const m = FIELD.exec(lines[i]!);
    if (!m) return undefined;
    const name = m[1]!;
    const v = m[2]!;
    const lower = name.toLowerCase();
    h.fields.push([name, v, lower]);
    if (lower === "connection") h.connection.push(...list(v));
    // Empty members kept: `chunked,` is not `chunked` to every parser, so it is refused.
    else if (lower === "transfer-encoding") h.transferEncoding.push(...v.split(",").map((x) => x.trim().toLowerCase()));
    else if (lower === "content-length") h.contentLength.push(...v.split(",").map((x) => x.trim()));
    else if (lower === "host") h.hosts.push(v);
    else if (lower === "upgrade") h.upgrade ??= v;
  }
  return h;
}

/** Whether the sender closes the connection after this message: HTTP/1.0 unless it asks to keep alive, HTTP/1.1 when it says close (RFC 9112 §9.3). */
export function closesAfter(h: Head & { version: string }): boolean {
  return h.version === "1.0" ? !h.connection.includes("keep-alive") : h.connection.includes("close");
}

// Only the methods Node's parser knows: one it does not (a token like "helloGET",
// left over from a body the relay read otherwise) would be a request the two
// parsers read apart.
const METHODS: ReadonlySet<string> = new Set(METHODS_NODE_KNOWS);

/** The request-target forms a relayed request may use (RFC 9112 §3.2), as Node reads them: a path, an absolute URL, or `*` for OPTIONS. */
function targetFits(method: string, target: string): boolean {
  if (method === "CONNECT") return false; // authority-form tunnels are not the relay's to carry
  return target.startsWith("/") || (target === "*" && method === "OPTIONS") || /^https?:\/\/[^/?#]/i.test(target);
}

export function parseRequestHead(buf: Buffer, end: number): RequestHead | undefined {
  const h = parseFields(buf.toString("latin1", 0, end));
  // The target in visible ASCII only: raw bytes above 0x7f are refused by Node's strict parser too.
  const m = h && /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([!-~]+) HTTP\/(1\.[01])$/.exec(h.line);
  return m && METHODS.has(m[1]!) && targetFits(m[1]!, m[2]!) ? Object.assign(h!, { method: m[1]!, target: m[2]!, version: m[3]! }) : undefined;
}

export function parseResponseHead(buf: Buffer, end: number): ResponseHead | undefined {
  const h = parseFields(buf.toString("latin1", 0, end));
  const m = h && /^HTTP\/(1\.[01]) (\d{3})(?: [^\r\n]*)?$/.exec(h.line);
  return m ? Object.assign(h!, { version: m[1]!, status: Number(m[2]) }) : undefined;
}

/** How a message body is delimited (RFC 9112 §6). */
export type Framing = { kind: "none" } | { kind: "length"; bytes: number } | { kind: "chunked" } | { kind: "until-close" };

function lengthOf(h: Head): number | undefined | "bad" {
  const all = h.contentLength;
  if (all.length === 0) return undefined;
  if (!all.every((v) => /^\d{1,15}$/.test(v) && v === all[0])) return "bad";
  return Number(all[0]);
}

/** A request's body framing, or undefined when it is anything but clear. */
export function requestFraming(h: RequestHead): Framing | undefined {
  const te = h.transferEncoding;
  const length = lengthOf(h);
  // One Content-Length with one value: `5, 5` or the header twice is what a smuggler sends.
  if (length === "bad" || h.contentLength.length > 1) return undefined;
  if (te.length > 0) {
    // Chunked, and only chunked, with no length beside it: anything else is a smuggling vector.
    if (length !== undefined || te.length !== 1 || te[0] !== "chunked" || h.version === "1.0") return undefined;
    return { kind: "chunked" };
  }
  return length ? { kind: "length", bytes: length } : { kind: "none" };
}

/** A response's body framing, given the method of the request it answers. */
export function responseFraming(h: ResponseHead, method: string): Framing | undefined {
  if (method === "HEAD" || (h.status >= 100 && h.status < 200) || h.status === 204 || h.status === 304) return { kind: "none" };
  const te = h.transferEncoding;
  const length = lengthOf(h);
  if (te.length > 0) return te.at(-1) === "chunked" ? { kind: "chunked" } : { kind: "until-close" };
  if (length === "bad") return undefined;
  return length === undefined ? { kind: "until-close" } : length === 0 ? { kind: "none" } : { kind: "length", bytes: length };
}

// A trailer field: a field line that does not frame the message (Node refuses a
// Content-Length or Transfer-Encoding there as it would in the head).
const TRAILER = new RegExp(`^(?!(?:content-length|transfer-encoding)\\s*:)${FIELD.source.slice(1)}`, "i");

// A chunk size in hex and its extensions as Node's parser takes them: `;name`
// or `;name=token` or `;name="quoted"`, no white space (RFC 9112 allows some;
// llhttp does not, and the two must agree on where a chunk begins).
const TOKEN = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+";
const CHUNK_SIZE_LINE = new RegExp(`^([0-9a-fA-F]{1,12})(?:;${TOKEN}(?:=(?:${TOKEN}|"[^"\\r\\n\\\\]*"))?)*\\r\\n$`);

/**
 * Walks over one message body as its bytes arrive, without copying them:
 * `take` says how many bytes of a chunk belong to the body and whether the
 * body ended there. A chunked body is followed through its size lines and
 * trailers; its bytes pass on unchanged.
 */
export class BodyWalker {
  private left: number;
  private phase: "data" | "size" | "crlf" | "trailers" | "done";
  private line = "";

  constructor(private readonly framing: Framing) {
    this.left = framing.kind === "length" ? framing.bytes : 0;
    this.phase = framing.kind === "chunked" ? "size" : framing.kind === "none" ? "done" : "data";
  }

  get done() {
    return this.phase === "done";
  }

  /** The body ends when the connection does (a response with neither length nor chunks). */
  get untilClose() {
    return this.framing.kind === "until-close";
  }

  /** Bytes of buf (from offset) that belong to this body; throws on a malformed chunked body. */
  take(buf: Buffer, offset = 0): { bytes: number; done: boolean } {
    if (this.framing.kind === "until-close") return { bytes: buf.length - offset, done: false };
    let i = offset;
    while (i < buf.length && this.phase !== "done") {
      if (this.phase === "data") {
        const n = Math.min(this.left, buf.length - i);
        i += n;
        this.left -= n;
        if (this.left === 0) this.phase = this.framing.kind === "chunked" ? "crlf" : "done";
        if (this.phase === "crlf") this.left = 2;
      } else if (this.phase === "crlf") {
        const expected = this.left === 2 ? 13 : 10;
        if (buf[i] !== expected) throw new Error("chunk data not followed by CRLF");
        i++;
        if (--this.left === 0) this.phase = "size";
      } else {
        const nl = buf.indexOf(10, i);
        const upTo = nl < 0 ? buf.length : nl + 1;
        this.line += buf.toString("latin1", i, upTo);
        i = upTo;
        if (this.line.length > 4096) throw new Error("chunk line too long");
        if (nl < 0) break;
        const line = this.line;
        this.line = "";
        if (!line.endsWith("\r\n")) throw new Error("chunk line not ended by CRLF");
        if (this.phase === "trailers") {
          if (line === "\r\n") this.phase = "done";
          else if (!TRAILER.test(line.slice(0, -2))) throw new Error("bad trailer field");
          continue;
        }
        const m = CHUNK_SIZE_LINE.exec(line);
        if (!m) throw new Error("bad chunk size");
        this.left = parseInt(m[1]!, 16);
        this.phase = this.left === 0 ? "trailers" : "data";
      }
    }
    return { bytes: i - offset, done: this.phase === "done" };
  }
}

/**
 * Whether a header is not sent on: hop-by-hop, or named by Connection (never the
 * framing headers). Transfer-Encoding stays: the relay passes bodies on framed as they came.
 */
function dropped(h: Head, lower: string): boolean {
  return (
    (HOP_BY_HOP.has(lower) && lower !== "transfer-encoding") ||
    (h.connection.length > 0 && h.connection.includes(lower) && lower !== "transfer-encoding" && lower !== "content-length")
  );
}

export type Client = { ip: string; proto: "http" | "https"; host: string };

/**
 * The request head as sent on to the container: hop-by-hop headers dropped,
 * the client's address, scheme and host added to whatever X-Forwarded-* a
 * proxy in front already set (as forwardRequestHeaders does for the HTTP path).
 */
export function forwardRequestHead(h: RequestHead, client: Client, upgrade: string | undefined): string {
  let out = `${h.line}\r\n`;
  const prior: string[] = [];
  let proto: string | undefined;
  let host: string | undefined;
  let protoCount = 0;
  let hostCount = 0;
  for (const [name, v, n] of h.fields) {
    if (dropped(h, n)) continue;
    if (n === "x-forwarded-for") prior.push(v);
    else if (n === "x-forwarded-proto") (proto = v), protoCount++;
    else if (n === "x-forwarded-host") (host = v), hostCount++;
    else out += `${name}: ${v}\r\n`;
  }
  out += `x-forwarded-for: ${[...prior, client.ip].join(", ")}\r\n`;
  out += `x-forwarded-proto: ${protoCount === 1 ? proto : client.proto}\r\n`;
  out += `x-forwarded-host: ${hostCount === 1 ? host : client.host}\r\n`;
  if (upgrade !== undefined) out += `connection: Upgrade\r\nupgrade: ${upgrade}\r\n`;
  return out + "\r\n";
}

/**
 * The response head as sent back, each header through forwardedResponseField
 * (the HTTP path's rule too), the Upgrade of a 101 that switches protocols put
 * back; `close` says the relay will end the client's connection after this
 * response.
 */
export function forwardResponseHead(h: ResponseHead, o: { close: boolean; upgrade: boolean }): string {
  // The relay speaks HTTP/1.1 to its client whatever the container speaks (RFC 9110 §6.2).
  let out = `${h.version === "1.1" ? h.line : `HTTP/1.1${h.line.slice(8)}`}\r\n`;
  for (const [name, v, n] of h.fields) {
    const kept = forwardedResponseField(n, v, h.connection, true);
    if (kept !== undefined) out += `${name}: ${kept}\r\n`;
  }
  if (o.upgrade) out += `connection: Upgrade\r\nupgrade: ${h.upgrade ?? ""}\r\n`;
  else if (o.close) out += "connection: close\r\n";
  return out + "\r\n";
}
