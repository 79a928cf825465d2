// The byte relay's own HTTP/1 request parser (http1.ts) against Node's (llhttp,
// strict): fed the same bytes, they must agree on every request ours accepts
// (method, target, body and where each pipelined request ends), or ours must
// refuse, handing the connection to Node. A request the two read apart is how
// one gets smuggled past a proxy.
import http from "node:http";
import type { AddressInfo } from "node:net";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BodyWalker, closesAfter, headEnd, MAX_HEAD_BYTES, parseRequestHead, requestFraming } from "../../src/gateway/http1";

type Parsed = { method: string; target: string; body: string; upgrade: boolean };
/** `closed`: the last request ended the connection, so whatever follows is read by nobody. */
type Reading = { messages: Parsed[]; refused: boolean; closed?: boolean };

/** Decodes a chunked body that BodyWalker already walked (so it is well formed). */
function unchunk(raw: Buffer): Buffer {
  const parts: Buffer[] = [];
  let i = 0;
  for (;;) {
    const eol = raw.indexOf("\r\n", i, "latin1");
    const size = parseInt(raw.toString("latin1", i, eol).split(";")[0]!.trim(), 16);
    if (size === 0) return Buffer.concat(parts);
    parts.push(raw.subarray(eol + 2, eol + 2 + size));
    i = eol + 2 + size + 2;
  }
}

/** How the relay reads the bytes: every request it would forward, then whether it gave up. */
function ours(bytes: Buffer): Reading {
  const messages: Parsed[] = [];
  let at = 0;
  while (at < bytes.length) {
    const end = headEnd(bytes, at);
    if (end < 0 || end - at > MAX_HEAD_BYTES) return { messages, refused: true };
    const head = parseRequestHead(bytes.subarray(at), end - at);
    const framing = head && requestFraming(head);
    if (!head || !framing) return { messages, refused: true };
    const upgrade = head.upgrade !== undefined && head.connection.includes("upgrade");
    const walker = new BodyWalker(framing);
    let taken: { bytes: number; done: boolean };
    try {
      taken = walker.take(bytes, end);
    } catch {
      return { messages, refused: true };
    }
    if (!taken.done) return { messages, refused: true }; // a body cut short: nothing to compare yet
    const raw = bytes.subarray(end, end + taken.bytes);
    messages.push({ method: head.method, target: head.target, body: (framing.kind === "chunked" ? unchunk(raw) : raw).toString("latin1"), upgrade });
    at = end + taken.bytes;
    if (upgrade) break; // past an upgrade the bytes are the new protocol's
    if (closesAfter(head)) return { messages, refused: false, closed: at < bytes.length };
  }
  return { messages, refused: false };
}

let server: http.Server;
let port = 0;
/** What Node reads on the connection of the case in progress: cases run one at a time. */
let current: Reading = { messages: [], refused: false };

beforeAll(async () => {
  // Host is a routing rule, not framing: compare the parsers alone.
  server = http.createServer({ requireHostHeader: false }, (req, res) => {
    const reading = current;
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => {
      reading.messages.push({ method: req.method!, target: req.url!, body: Buffer.concat(parts).toString("latin1"), upgrade: false });
      res.end("ok");
    });
  });
  server.on("upgrade", (req, socket) => {
    current.messages.push({ method: req.method!, target: req.url!, body: "", upgrade: true });
    socket.destroy();
  });
  server.on("clientError", (_error, socket) => {
    current.refused = true;
    // Requests parsed before the bad one are delivered on later ticks: let them finish.
    setTimeout(() => socket.destroy(), 20);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

/** How Node reads the bytes, sent whole on one connection that then half-closes. */
async function node(bytes: Buffer): Promise<Reading> {
  const reading: Reading = { messages: [], refused: false };
  current = reading;
  await new Promise<void>((resolve) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.end(bytes));
    socket.resume();
    socket.on("close", () => resolve());
    socket.on("error", () => resolve());
    setTimeout(() => socket.destroy(), 1_000).unref();
  });
  // The handler of the last request may still be reading its body.
  await new Promise((resolve) => setTimeout(resolve, 10));
  return reading;
}

async function agree(text: string): Promise<{ ours: Reading; node: Reading }> {
  const bytes = Buffer.from(text, "latin1");
  const mine = ours(bytes);
  const theirs = await node(bytes);
  // Every request ours forwards, Node reads the same way, in the same place.
  expect(theirs.messages.slice(0, mine.messages.length), `${JSON.stringify(text)}: Node read otherwise`).toEqual(mine.messages);
  if (!mine.refused) {
    // Bytes after a request that closes the connection are an error to Node, and nothing to the relay.
    if (!mine.closed) expect(theirs.refused, `${JSON.stringify(text)}: ours accepted what Node refuses`).toBe(false);
    expect(theirs.messages.length, `${JSON.stringify(text)}: Node read more requests`).toBe(mine.messages.length);
  }
  return { ours: mine, node: theirs };
}

const CORPUS: Array<[name: string, text: string, oursRefuses?: boolean]> = [
  ["a plain GET", "GET /a?b=1 HTTP/1.1\r\nHost: x\r\n\r\n"],
  ["pipelined GETs", "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\nHEAD /3 HTTP/1.1\r\nHost: x\r\n\r\n"],
  ["a body by Content-Length, then another request", "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /next HTTP/1.1\r\nHost: x\r\n\r\n"],
  [
    "a chunked body with extensions and trailers",
    'POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6;name="v";flag\r\n world\r\n0\r\nX-Trailer: t\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n',
  ],
  ["white space before a chunk extension", "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5 ;ext\r\nhello\r\n0\r\n\r\n", true],
  ["a method Node does not know", "HELLOGET /m HTTP/1.1\r\nHost: x\r\n\r\n", true],
  ["a Content-Length among the trailers", "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 3\r\n\r\nabc", true],
  ["a malformed trailer line", "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\r\n\r\n", true],
  ["a raw byte above 0x7f in the target", "GET /caf\u00e9 HTTP/1.1\r\nHost: x\r\n\r\n", true],
  ["a target that is no path", "POST s HTTP/1.1\r\nHost: x\r\n\r\n", true],
  ["an absolute-form target", "GET http://x/abs?q=1 HTTP/1.1\r\nHost: x\r\n\r\n"],
  ["OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"],
  ["CONNECT", "CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n", true],
  ["upper-case hex chunk sizes", "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n"],
  ["Content-Length beside Transfer-Encoding", "POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG", true],
  ["two Content-Lengths", "POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nhello", true],
  ["a Content-Length list", "POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\nhello", true],
  ["a signed Content-Length", "POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello", true],
  ["chunked, then another coding", "POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n", true],
  ["a trailing comma in Transfer-Encoding", "POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked,\r\n\r\n0\r\n\r\n", true],
  ["Transfer-Encoding twice", "POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", true],
  ["chunked on HTTP/1.0", "POST /s HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", true],
  ["a bad chunk size", "POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", true],
  ["a chunk size with a sign", "POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n", true],
  ["chunk data longer than its size", "POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n", true],
  ["a chunk line ended by a bare LF", "POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", true],
  ["an obs-folded header", "GET /f HTTP/1.1\r\nHost: x\r\nX-Long: a\r\n b\r\n\r\n", true],
  ["a space before the colon", "GET /f HTTP/1.1\r\nHost: x\r\nContent-Length : 5\r\n\r\nhello", true],
  ["a bare LF inside a header", "GET /f HTTP/1.1\r\nHost: x\r\nX-A: a\nContent-Length: 5\r\n\r\nhello", true],
  ["a NUL in a header value", "GET /f HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b\r\n\r\n", true],
  ["a request line with two spaces", "GET  /f HTTP/1.1\r\nHost: x\r\n\r\n", true],
  ["HTTP/2.0 in a request line", "GET /f HTTP/2.0\r\nHost: x\r\n\r\n", true],
  [
    "a WebSocket upgrade with bytes after it",
    "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n\u0081\u0005hello",
  ],
  ["an HTTP/1.0 request", "GET /old HTTP/1.0\r\nHost: x\r\n\r\n"],
  ["a tab around a header value", "GET /t HTTP/1.1\r\nHost: x\r\nX-A:\tv\t\r\n\r\n"],
];

describe("the relay's HTTP/1 parser against Node's", () => {
  for (const [name, text, oursRefuses] of CORPUS) {
    it(`agrees on ${name}${oursRefuses ? " (ours refuses)" : ""}`, async () => {
      const { ours: mine } = await agree(text);
      expect(mine.refused).toBe(oursRefuses === true);
    });
  }

  it("agrees on 400 seeded mutations of the corpus", async () => {
    // A fixed seed: the same cases every run, so a failure can be replayed.
    let seed = 20261125;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const pieces = [
      "\r\n",
      "\n",
      "\r",
      " ",
      "\t",
      ",",
      ";",
      "0",
      "5",
      "chunked",
      "Content-Length: 3\r\n",
      "Transfer-Encoding: chunked\r\n",
      ":",
      "\u0000",
      "\u00ff",
    ];
    // Edits that keep a message well formed as often as not, so the parsers are compared on accepted input too.
    const structured: Array<(text: string) => string> = [
      (t) => t.replace(/Content-Length: \d+/i, () => `Content-Length: ${Math.floor(random() * 12)}`),
      (t) => t.replace(/\r\n([0-9a-fA-F]+)\r\n/, () => `\r\n${Math.floor(random() * 16).toString(16)}\r\n`),
      (t) => t.replace(/\r\n([0-9a-fA-F]+)\r\n/, (_m, size: string) => `\r\n${size}${pick([";a", ";a=b", ';a="b c"', "; a", ";a=", ";=b"])}\r\n`),
      (t) => t.replace(/HTTP\/1\.[01]\r\n/, (line) => `${line}X-Pad: ${pick(["v", "", " v ", "a,b", "\tv"])}\r\n`),
      (t) => t.replace(/\r\n(Host|Content-Length|Transfer-Encoding)/i, (_m, name: string) => `\r\n${pick([name.toUpperCase(), name.toLowerCase(), name])}`),
      (t) => `${t}${pick(["GET /more HTTP/1.1\r\nHost: x\r\n\r\n", "POST /more HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok", "G", "\r\n"])}`,
    ];
    const seeds = CORPUS.map(([, text]) => text);
    const wellFormed = CORPUS.filter(([, , refused]) => !refused).map(([, text]) => text);
    let accepted = 0;
    for (let n = 0; n < 400; n++) {
      let text: string;
      if (random() < 0.5) text = pick(structured)(pick(wellFormed));
      else {
        text = pick(seeds);
        for (let edits = 1 + Math.floor(random() * 2); edits > 0; edits--) {
          const at = Math.floor(random() * text.length);
          const kind = random();
          if (kind < 0.4) text = text.slice(0, at) + pick(pieces) + text.slice(at);
          else if (kind < 0.7) text = text.slice(0, at) + text.slice(at + 1);
          else text = text.slice(0, at) + text.slice(at, at + 8) + text.slice(at);
        }
      }
      if (!(await agree(text)).ours.refused) accepted++;
    }
    // The mutations must not all be refused, or they compare nothing.
    expect(accepted).toBeGreaterThan(80);
  }, 120_000);
});
