// The relay's HTTP/1.1 framing: where messages end, what is refused, what is forwarded.
import { describe, expect, it } from "vitest";
import {
  BodyWalker,
  closesAfter,
  forwardRequestHead,
  forwardResponseHead,
  headEnd,
  parseRequestHead,
  parseResponseHead,
  requestFraming,
  responseFraming,
} from "../../src/gateway/http1";

const req = (text: string) => {
  const b = Buffer.from(text, "latin1");
  return parseRequestHead(b, headEnd(b));
};
const res = (text: string) => {
  const b = Buffer.from(text, "latin1");
  return parseResponseHead(b, headEnd(b));
};

describe("request heads", () => {
  it("reads the request line and fields, keeping names as sent", () => {
    const h = req("POST /up?x=1 HTTP/1.1\r\nHost: a.gw.test\r\nContent-Length:  12 \r\nX-Thing: v\r\n\r\n")!;
    expect(h).toMatchObject({ method: "POST", target: "/up?x=1", version: "1.1", hosts: ["a.gw.test"] });
    expect(h.fields.map(([n, v]) => [n, v])).toEqual([
      ["Host", "a.gw.test"],
      ["Content-Length", "12"],
      ["X-Thing", "v"],
    ]);
    expect(requestFraming(h)).toEqual({ kind: "length", bytes: 12 });
  });

  it("refuses what a strict server might read differently", () => {
    expect(req("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n")).toBeUndefined();
    expect(req("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n")).toBeUndefined();
    expect(req("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n")).toBeUndefined();
    expect(req("GET / HTTP/1.1\r\nX: a\nY: b\r\n\r\n")).toBeUndefined();
    expect(req("GET / HTTP/2.0\r\n\r\n")).toBeUndefined();
    expect(req("GET / HTTP/1.1\r\nX: a\x00b\r\n\r\n")).toBeUndefined();
    expect(req("GET /a\x01b HTTP/1.1\r\nHost: a\r\n\r\n")).toBeUndefined();
    expect(req("GET / HTTP/1.1\r\nX: a\tb\r\n\r\n")!.fields[0]![1]).toBe("a\tb");
    const framing = (fields: string) => requestFraming(req(`POST / HTTP/1.1\r\n${fields}\r\n`)!);
    expect(framing("Content-Length: 4\r\nTransfer-Encoding: chunked\r\n")).toBeUndefined();
    expect(framing("Transfer-Encoding: gzip, chunked\r\n")).toBeUndefined();
    expect(framing("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n")).toBeUndefined();
    expect(framing("Content-Length: 4\r\nContent-Length: 5\r\n")).toBeUndefined();
    expect(framing("Content-Length: -1\r\n")).toBeUndefined();
    expect(framing("Content-Length: 4, 4\r\n")).toBeUndefined();
    expect(framing("Content-Length: 4\r\nContent-Length: 4\r\n")).toBeUndefined();
    expect(framing("Transfer-Encoding: chunked,\r\n")).toBeUndefined();
    expect(framing("Transfer-Encoding: ,chunked\r\n")).toBeUndefined();
    expect(framing("Transfer-Encoding: Chunked\r\n")).toEqual({ kind: "chunked" });
    expect(framing("")).toEqual({ kind: "none" });
  });

  it("drops hop-by-hop fields and those Connection names, and adds X-Forwarded-*", () => {
    const h = req(
      "GET / HTTP/1.1\r\nHost: a.gw.test\r\nConnection: keep-alive, X-Private\r\nX-Private: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\nX-Forwarded-For: 1.2.3.4\r\nAccept: */*\r\n\r\n",
    )!;
    expect(forwardRequestHead(h, { ip: "5.6.7.8", proto: "https", host: "a.gw.test" }, undefined)).toBe(
      "GET / HTTP/1.1\r\nHost: a.gw.test\r\nAccept: */*\r\nx-forwarded-for: 1.2.3.4, 5.6.7.8\r\nx-forwarded-proto: https\r\nx-forwarded-host: a.gw.test\r\n\r\n",
    );
    const up = req("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")!;
    expect(forwardRequestHead(up, { ip: "1.1.1.1", proto: "http", host: "a" }, "websocket")).toMatch(/\r\nconnection: Upgrade\r\nupgrade: websocket\r\n\r\n$/);
  });
});

describe("connection persistence", () => {
  it("closes after HTTP/1.0 unless asked to keep alive, after HTTP/1.1 only when told, for requests and responses alike", () => {
    expect(closesAfter(req("GET / HTTP/1.0\r\n\r\n")!)).toBe(true);
    expect(closesAfter(req("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")!)).toBe(false);
    expect(closesAfter(req("GET / HTTP/1.1\r\n\r\n")!)).toBe(false);
    expect(closesAfter(req("GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n")!)).toBe(true);
    expect(closesAfter(res("HTTP/1.0 200 OK\r\n\r\n")!)).toBe(true);
    expect(closesAfter(res("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")!)).toBe(true);
    expect(closesAfter(res("HTTP/1.1 200 OK\r\n\r\n")!)).toBe(false);
  });
});

describe("response heads", () => {
  it("knows which responses have no body", () => {
    const ok = res("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")!;
    expect(responseFraming(ok, "GET")).toEqual({ kind: "length", bytes: 10 });
    expect(responseFraming(ok, "HEAD")).toEqual({ kind: "none" });
    expect(responseFraming(res("HTTP/1.1 204 No Content\r\n\r\n")!, "GET")).toEqual({ kind: "none" });
    expect(responseFraming(res("HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n")!, "GET")).toEqual({ kind: "none" });
    expect(responseFraming(res("HTTP/1.1 100 Continue\r\n\r\n")!, "POST")).toEqual({ kind: "none" });
    expect(responseFraming(res("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n")!, "GET")).toEqual({ kind: "chunked" });
    expect(responseFraming(res("HTTP/1.0 200 OK\r\n\r\n")!, "GET")).toEqual({ kind: "until-close" });
  });

  it("sends back the head without hop-by-hop fields, saying when the connection will close", () => {
    const h = res("HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Secret\r\nKeep-Alive: timeout=5\r\nX-Secret: 1\r\nTransfer-Encoding: chunked\r\n\r\n")!;
    expect(forwardResponseHead(h, { close: false, upgrade: false })).toBe("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    expect(forwardResponseHead(h, { close: true, upgrade: false })).toBe("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nconnection: close\r\n\r\n");
    // A container speaking HTTP/1.0 is answered for in HTTP/1.1, which the client asked in.
    expect(forwardResponseHead(res("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n")!, { close: false, upgrade: false })).toBe(
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n",
    );
  });
});

describe("BodyWalker", () => {
  /** Feeds the bytes in pieces of `step` and says where the body ended. */
  const walk = (framing: ConstructorParameters<typeof BodyWalker>[0], text: string, step: number) => {
    const w = new BodyWalker(framing);
    const bytes = Buffer.from(text, "latin1");
    let at = 0;
    for (let i = 0; i < bytes.length && !w.done; i += step) {
      const piece = bytes.subarray(i, Math.min(bytes.length, i + step));
      const r = w.take(piece);
      at += r.bytes;
      if (r.done) break;
    }
    return { done: w.done, at };
  };

  it("follows a chunked body to its end, however the bytes are split", () => {
    const body = "5\r\nhello\r\n6;name=v\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n";
    for (const step of [1, 2, 3, 7, 100]) expect(walk({ kind: "chunked" }, body + "GET /next", step)).toEqual({ done: true, at: body.length });
  });

  it("counts a length, and refuses a malformed chunk", () => {
    expect(walk({ kind: "length", bytes: 4 }, "abcdEFG", 3)).toEqual({ done: true, at: 4 });
    expect(() => new BodyWalker({ kind: "chunked" }).take(Buffer.from("zz\r\n"))).toThrow(/chunk size/);
    expect(() => new BodyWalker({ kind: "chunked" }).take(Buffer.from("2\r\nabXY"))).toThrow(/CRLF/);
    expect(() => new BodyWalker({ kind: "chunked" }).take(Buffer.from("2\nab\r\n"))).toThrow(/CRLF/);
  });
});
