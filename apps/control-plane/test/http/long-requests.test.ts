import net from "node:net";
import { sqliteDatabase as sqlite } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

/** Sends raw bytes in small pieces (as a slow client would) and answers the response's status line and body. */
function dribble(url: string, pieces: string[]): Promise<{ statusLine: string; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let reply = "";
    socket.on("data", (d) => (reply += d.toString()));
    socket.on("error", reject);
    socket.on("close", () => {
      const [head = "", body = ""] = reply.split("\r\n\r\n");
      resolve({ statusLine: head.split("\r\n")[0] ?? "", body });
    });
    socket.on("connect", async () => {
      for (const p of pieces) {
        if (socket.destroyed) return;
        socket.write(p);
        await new Promise((r) => setTimeout(r, 2));
      }
    });
  });
}

/** Sends each request on one connection after the answer to the one before; answers each response's status line and body. */
function oneConnection(url: string, requests: string[]): Promise<Array<{ statusLine: string; body: string }>> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const answers: Array<{ statusLine: string; body: string }> = [];
    let buf = "";
    const next = () => {
      const request = requests[answers.length];
      if (request === undefined) return void socket.end();
      socket.write(request);
    };
    socket.on("data", (d) => {
      buf += d.toString();
      const headEnd = buf.indexOf("\r\n\r\n");
      const length = Number(/content-length: (\d+)/i.exec(buf)?.[1] ?? 0);
      if (headEnd < 0 || buf.length < headEnd + 4 + length) return;
      answers.push({ statusLine: buf.slice(0, buf.indexOf("\r\n")), body: buf.slice(headEnd + 4, headEnd + 4 + length) });
      buf = buf.slice(headEnd + 4 + length);
      next();
    });
    socket.on("error", reject);
    socket.on("close", () => resolve(answers));
    socket.on("connect", next);
  });
}

describe("URLs and headers past Node's 16 KiB limit", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(sqlite);
  });
  afterAll(() => h.close());

  const shape = (r: { json: unknown; headers: Headers }, code: string) => {
    expect(r.json).toEqual({ error: { code, message: expect.any(String), requestId: r.headers.get("x-request-id") } });
    expect(r.headers.get("x-request-id")).toMatch(/^req_/);
  };

  it("answers a URL longer than 16 KiB with 414 URI_TOO_LONG in the one error shape, and keeps serving", async () => {
    for (const n of [17 * 1024, 100 * 1024]) {
      const r = await h.call("GET", `/nodes?search=${"a".repeat(n)}`);
      expect(r.status, String(n)).toBe(414);
      expect(r.headers.get("content-type")).toBe("application/json");
      shape(r, "URI_TOO_LONG");
    }
    expect((await h.call("GET", "/health")).status).toBe(200);
  });

  it("answers on a connection kept alive after earlier requests too", async () => {
    const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;
    const answers = await oneConnection(h.url, [get("/health"), get("/health"), get(`/nodes?search=${"a".repeat(17_000)}`)]);
    expect(answers.map((a) => a.statusLine)).toEqual(["HTTP/1.1 200 OK", "HTTP/1.1 200 OK", "HTTP/1.1 414 URI Too Long"]);
    expect(JSON.parse(answers[2]!.body).error.code).toBe("URI_TOO_LONG");
  });

  it("answers headers that together pass the limit with 431 HEADERS_TOO_LARGE in the same shape", async () => {
    const r = await h.call("GET", "/health", { headers: { "x-padding": "b".repeat(17 * 1024) } });
    expect(r.status).toBe(431);
    shape(r, "HEADERS_TOO_LARGE");
  });

  it("lets a URL under the limit through to the API, which answers it", async () => {
    const r = await h.call("GET", `/templates?search=${"a".repeat(15 * 1024)}`);
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe("VALIDATION_ERROR");
  });

  it("answers a long URL sent a little at a time in the error shape too", async () => {
    const pieces = ["GET /nodes?search=", ...Array.from({ length: 20 }, () => "a".repeat(1024)), " HTTP/1.1\r\nHost: x\r\n\r\n"];
    const r = await dribble(h.url, pieces);
    // The parser's last piece no longer shows the request line, so this one may read as headers too large.
    expect(r.statusLine).toMatch(/^HTTP\/1\.1 (414|431) /);
    expect(JSON.parse(r.body).error.code).toMatch(/^(URI_TOO_LONG|HEADERS_TOO_LARGE)$/);
  });

  it("keeps Node's own answer to a request it cannot parse", async () => {
    const r = await dribble(h.url, ["GET / HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n"]);
    expect(r.statusLine).toBe("HTTP/1.1 400 Bad Request");
  });
});
