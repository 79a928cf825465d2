import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { createGateway, DialError, type EndpointTarget, type Resolution } from "../../src/gateway/proxy";
import { endpointLabel, forwardRequestHeaders } from "../../src/gateway/headers";
import { asSocketLike } from "../../src/gateway/socket-like";
import { createLogger } from "../../src/services/logger";

// The gateway's HTTP behaviour, with a dialer that opens a plain TCP connection
// to a local server standing in for the container. The tunnel through a real
// agent is tested end to end elsewhere.

let upstream: http.Server;
let upstreamPort: number;
let fronts: http.Server[] = [];
const ports = { relay: 0, http: 0 };
const seen: http.IncomingHttpHeaders[] = [];
let dials = 0;

const routes: Record<string, Resolution> = {
  app: { kind: "ok", target: { deploymentId: "dep_1", nodeId: "node_1", port: 0 } },
  closed: { kind: "ok", target: { deploymentId: "dep_2", nodeId: "node_1", port: 1 } },
  gone: { kind: "not_running" },
  away: { kind: "node_unreachable" },
};

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    seen.push(req.headers);
    if (req.url === "/echo") {
      let n = 0;
      req.on("data", (c: Buffer) => (n += c.length));
      req.on("end", () => res.end(JSON.stringify({ bytes: n, method: req.method })));
      return;
    }
    if (req.url === "/big") {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      const chunk = Buffer.alloc(64 * 1024, 7);
      let left = 256; // 16 MiB
      const pump = () => {
        while (left > 0) {
          left--;
          if (!res.write(chunk)) return void res.once("drain", pump);
        }
        res.end();
      };
      return pump();
    }
    if (req.url === "/sse") {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      let i = 0;
      const t = setInterval(() => {
        res.write(`data: tick ${i++}\n\n`);
        if (i === 3) {
          clearInterval(t);
          res.end();
        }
      }, 100);
      return;
    }
    if (req.url === "/until-close") return void req.socket.end("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nthe body ends when the connection does");
    if (req.url === "/slow") return void setTimeout(() => res.end("late"), 3_000);
    res.setHeader("connection", "keep-alive, x-secret");
    res.setHeader("x-secret", "hop");
    res.end(`hello ${req.method} ${req.url}`);
  });
  new WebSocketServer({ server: upstream }).on("connection", (ws) => ws.on("message", (m, binary) => ws.send(m, { binary })));
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
  upstreamPort = (upstream.address() as AddressInfo).port;
  routes.app = { kind: "ok", target: { deploymentId: "dep_1", nodeId: "node_1", port: upstreamPort } };

  const gateway = createGateway({
    domain: "gw.test",
    secure: true,
    log: createLogger("silent"),
    timeouts: { responseMs: 1_000, idleMs: 5_000 },
    resolver: { resolve: async (label) => routes[label.split("-")[0]!] ?? { kind: "unknown_host" } },
    dialer: {
      dial: (t: EndpointTarget) =>
        new Promise((resolve, reject) => {
          dials++;
          const s = net.connect(t.port, "127.0.0.1");
          s.once("connect", () => resolve(asSocketLike(s)));
          s.once("error", () => reject(new DialError("port_not_ready", `nothing listens on port ${t.port}`)));
        }),
    },
  });
  // The same gateway in front of two servers: one with the byte relay taking
  // the connections whose first request is for an endpoint (as server.ts has
  // it), one serving every request through Node's HTTP server and client (what
  // a connection that mixes hosts falls back to).
  for (const mode of ["relay", "http"] as const) {
    const front = http.createServer((req, res) => {
      if (gateway.owns(req.headers.host)) return void gateway.handleRequest(req, res);
      res.end("the API");
    });
    front.on("upgrade", (req, socket, head) => void gateway.handleUpgrade(req, socket, head));
    if (mode === "relay") gateway.intercept(front);
    await new Promise<void>((r) => front.listen(0, "127.0.0.1", r));
    ports[mode] = (front.address() as AddressInfo).port;
    fronts.push(front);
  }
});
afterAll(async () => {
  for (const front of fronts) front.closeAllConnections();
  upstream.closeAllConnections();
  await Promise.all(fronts.map((front) => new Promise((r) => front.close(r))));
  await new Promise((r) => upstream.close(r));
});

let frontPort = 0;
function get(host: string, path: string, init: { method?: string; body?: Buffer | string; headers?: Record<string, string>; agent?: http.Agent } = {}) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port: frontPort, path, method: init.method ?? "GET", headers: { host, ...init.headers }, agent: init.agent }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (c: Buffer) => parts.push(c));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(parts) }));
    });
    req.on("error", reject);
    req.end(init.body);
  });
}

describe("gateway headers", () => {
  it("reads the endpoint label from the Host header", () => {
    expect(endpointLabel("abc-8888.gw.test", "gw.test")).toBe("abc-8888");
    expect(endpointLabel("ABC-8888.GW.test:443", "gw.test")).toBe("abc-8888");
    expect(endpointLabel("gw.test", "gw.test")).toBeUndefined();
    expect(endpointLabel("a.b.gw.test", "gw.test")).toBeUndefined();
    expect(endpointLabel("evil-gw.test", "gw.test")).toBeUndefined();
  });

  it("drops hop-by-hop headers and adds X-Forwarded-*", () => {
    const h = forwardRequestHeaders({ connection: "keep-alive, x-private", "x-private": "1", "keep-alive": "5", te: "trailers", accept: "*/*", "x-forwarded-for": "1.2.3.4" }, { ip: "5.6.7.8", proto: "https", host: "a.gw.test" });
    expect(h).toEqual({ accept: "*/*", "x-forwarded-for": "1.2.3.4, 5.6.7.8", "x-forwarded-proto": "https", "x-forwarded-host": "a.gw.test" });
  });

});

describe.each(["relay", "http"] as const)("gateway (%s)", (mode) => {
  beforeAll(() => {
    frontPort = ports[mode];
  });

  it("carries a GET to the container and the answer back, without hop-by-hop headers", async () => {
    const r = await get("app-1.gw.test", "/hello?x=1");
    expect(r.status).toBe(200);
    expect(r.body.toString()).toBe("hello GET /hello?x=1");
    expect(r.headers["x-secret"]).toBeUndefined();
    const h = seen.at(-1)!;
    expect(h["x-forwarded-for"]).toBe("127.0.0.1");
    expect(h["x-forwarded-proto"]).toBe("https");
    expect(h["x-forwarded-host"]).toBe("app-1.gw.test");
  });

  it("streams a large upload and a large download", async () => {
    const body = Buffer.alloc(20 * 1024 * 1024, 1);
    const up = await get("app-1.gw.test", "/echo", { method: "POST", body });
    expect(JSON.parse(up.body.toString())).toEqual({ bytes: body.length, method: "POST" });
    const down = await get("app-1.gw.test", "/big");
    expect(down.body.length).toBe(16 * 1024 * 1024);
  });

  it("flushes server-sent events as they come", async () => {
    const times: number[] = [];
    await new Promise<void>((resolve) => {
      http.get({ host: "127.0.0.1", port: frontPort, path: "/sse", headers: { host: "app-1.gw.test" } }, (res) => {
        expect(res.headers["content-type"]).toBe("text/event-stream");
        res.on("data", () => times.push(Date.now()));
        res.on("end", resolve);
      });
    });
    expect(times.length).toBeGreaterThanOrEqual(3);
    expect(times.at(-1)! - times[0]!).toBeGreaterThanOrEqual(150);
  });

  it("carries a WebSocket upgrade both ways", async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${frontPort}/socket`, { headers: { host: "app-1.gw.test" } });
    await new Promise((r, j) => (ws.once("open", r), ws.once("error", j)));
    const echoed = new Promise<string>((r) => ws.once("message", (m) => r(m.toString())));
    ws.send("ping over the tunnel");
    expect(await echoed).toBe("ping over the tunnel");
    ws.close();
  });

  it("serves 200 concurrent requests, reusing connections", async () => {
    const before = dials;
    const rs = await Promise.all(Array.from({ length: 200 }, (_, i) => get("app-1.gw.test", `/n${i}`)));
    expect(rs.every((r, i) => r.status === 200 && r.body.toString() === `hello GET /n${i}`)).toBe(true);
    const rs2 = await Promise.all(Array.from({ length: 50 }, (_, i) => get("app-1.gw.test", `/again${i}`)));
    expect(rs2.every((r) => r.status === 200)).toBe(true);
    expect(dials - before).toBeLessThanOrEqual(200);
  });

  it("answers clear pages when it cannot reach the container", async () => {
    const unknown = await get("nope-1.gw.test", "/");
    expect(unknown.status).toBe(404);
    expect(unknown.headers["x-gateway-error"]).toBe("UNKNOWN_HOST");
    expect(unknown.body.toString()).toContain("No such endpoint");
    const gone = await get("gone-1.gw.test", "/");
    expect(gone.status).toBe(404);
    expect(gone.body.toString()).toContain("stopped or was deleted");
    const away = await get("away-1.gw.test", "/");
    expect(away.status).toBe(503);
    expect(away.headers["retry-after"]).toBe("10");
    const closed = await get("closed-1.gw.test", "/");
    expect(closed.status).toBe(502);
    expect(closed.body.toString()).toContain("nothing answers on this port");
  });

  it("bounds the wait for a response", async () => {
    const r = await get("app-1.gw.test", "/slow");
    expect(r.status).toBe(504);
  });

  it("answers each request on a connection that moves between endpoints and the API", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const hosts = ["app-1.gw.test", "nope-1.gw.test", "app-2.gw.test", "gw.test", "gone-1.gw.test", "app-1.gw.test"];
    const answers = [];
    for (const host of hosts) answers.push(await get(host, "/mixed", { agent }));
    agent.destroy();
    expect(answers.map((a) => a.status)).toEqual([200, 404, 200, 200, 404, 200]);
    expect(answers[2]!.body.toString()).toBe("hello GET /mixed");
    expect(answers[3]!.body.toString()).toBe("the API");
    expect(seen.at(-1)!["x-forwarded-host"]).toBe("app-1.gw.test");
  });

  it("answers pipelined requests in order, a chunked upload and a HEAD among them", async () => {
    const host = "Host: app-1.gw.test\r\n";
    const text = await exchange(
      `GET /first HTTP/1.1\r\n${host}\r\n` +
        `POST /echo HTTP/1.1\r\n${host}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nx-trailer: 1\r\n\r\n` +
        `HEAD /third HTTP/1.1\r\n${host}\r\n` +
        `GET /last HTTP/1.1\r\n${host}Connection: close\r\n\r\n`,
    );
    const bodies = text.split(/HTTP\/1\.1 200 OK\r\n/).slice(1);
    expect(bodies).toHaveLength(4);
    expect(bodies[0]).toMatch(/hello GET \/first$/);
    expect(bodies[1]).toMatch(/\{"bytes":11,"method":"POST"\}$/);
    expect(bodies[2]).toMatch(/\r\n\r\n$/); // a head and no body
    expect(bodies[2]).not.toContain("hello");
    expect(bodies[3]).toMatch(/connection: close\r\n/i);
    expect(bodies[3]).toMatch(/hello GET \/last$/);
  });

  it("refuses a request with both Content-Length and Transfer-Encoding before it reaches the container", async () => {
    const before = seen.length;
    const text = await exchange("POST /echo HTTP/1.1\r\nHost: app-1.gw.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: app-1.gw.test\r\n\r\n");
    expect(text).toMatch(/^HTTP\/1\.1 400 /);
    expect(seen.length).toBe(before);
  });

  it("carries a response that ends when the container closes its connection", async () => {
    // The relay passes it on as it is and closes after; Node's HTTP path re-frames it as chunked.
    const text = await exchange("GET /until-close HTTP/1.1\r\nHost: app-1.gw.test\r\nConnection: close\r\n\r\n");
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(text).toContain("the body ends when the connection does");
    if (mode === "relay") expect(text).toMatch(/connection: close\r\n\r\nthe body ends when the connection does$/);
  });
});

/** Writes raw bytes to the gateway and reads until it closes the connection. */
function exchange(text: string) {
  return new Promise<string>((resolve, reject) => {
    const s = net.connect(frontPort, "127.0.0.1", () => s.write(text));
    let got = "";
    s.on("data", (c) => (got += c.toString("latin1")));
    s.on("close", () => resolve(got));
    s.on("error", reject);
    setTimeout(() => (s.destroy(), reject(new Error(`no close; got ${JSON.stringify(got)}`))), 5_000);
  });
}
