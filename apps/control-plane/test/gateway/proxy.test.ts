import http from "node:http";
import type { AddressInfo } from "node:net";
import net from "node:net";
import type { Duplex } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { endpointLabel, forwardRequestHeaders, hostOnlyCookie } from "../../src/gateway/headers";
import { DialError, type EndpointTarget, type GatewayTimeouts, type Resolution } from "../../src/gateway/ports";
import { createGateway } from "../../src/gateway/proxy";
import { asSocketLike } from "../../src/gateway/socket-like";
import { createLogger } from "../../src/services/logger";
import { upload } from "../support/upload";

// The gateway's HTTP behaviour, with a dialer that opens a plain TCP connection
// to a local server standing in for the container. The tunnel through a real
// agent is tested end to end elsewhere.

let upstream: http.Server;
let upstreamPort: number;
const fronts: http.Server[] = [];
const ports = { relay: 0, http: 0 };
const seen: http.IncomingHttpHeaders[] = [];
let dials = 0;
let dropThenHang = 0;
let heldOpen = 0;

// Cookies a container sets for the domain every endpoint and the API share, and what the client must get instead.
const TOSSED_COOKIES = ["toss=1; Domain=gw.test; Path=/", "up=2; domain=.GW.TEST"];
const HOST_ONLY_COOKIES = ["toss=1; Path=/", "up=2"];

const routes: Record<string, Resolution> = {
  app: { kind: "ok", target: { deploymentId: "dep_1", nodeId: "node_1", port: 0 } },
  closed: { kind: "ok", target: { deploymentId: "dep_2", nodeId: "node_1", port: 1 } },
  gone: { kind: "not_running" },
  moving: { kind: "ok", target: { deploymentId: "dep_3", nodeId: "node_1", port: 0 } },
  slowdial: { kind: "ok", target: { deploymentId: "dep_slow", nodeId: "node_1", port: 0 } },
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
    // A header with raw UTF-8 bytes, as servers send file names: a proxy passes bytes, not characters.
    if (req.url === "/raw-header")
      return void req.socket.end(
        Buffer.concat([
          Buffer.from('HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-disposition: attachment; filename="'),
          Buffer.from("résumé.pdf"),
          Buffer.from('"\r\ncontent-length: 2\r\n\r\nok'),
        ]),
      );
    // Answers no HTTP client should send on: a status under 100, a control character in the reason.
    if (req.url === "/status-99") return void req.socket.end("HTTP/1.1 099 Odd\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
    if (req.url === "/bad-reason") return void req.socket.end("HTTP/1.1 200 O\x01K\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
    // Says it will close, and takes a while to finish its body.
    if (req.url === "/slow-close") {
      res.writeHead(200, { connection: "close", "content-length": 8 }).write("part");
      return void setTimeout(() => res.end("rest"), 500);
    }
    if (req.url === "/close-after") return void res.setHeader("connection", "close").end("bye");
    if (req.url === "/cookies") {
      res.setHeader("set-cookie", [
        "toss=1; Domain=gw.test; Path=/; Secure",
        "mine=2; path=/; HttpOnly",
        "odd=3;DOMAIN=.test;SameSite=Lax",
        "v=a=b; domain=app-1.gw.test",
      ]);
      return void res.end("cookies");
    }
    if (req.url === "/cookies-error") {
      res.writeHead(500, { "set-cookie": TOSSED_COOKIES });
      return void res.end("failed");
    }
    if (req.url === "/old") return void req.socket.end("HTTP/1.0 200 OK\r\ncontent-length: 3\r\n\r\nold");
    // The first time, the connection is dropped as if closed while idle; the second, no answer at all.
    if (req.url === "/drop-then-hang") return void (dropThenHang++ === 0 && req.socket.destroy());
    res.setHeader("connection", "keep-alive, x-secret");
    res.setHeader("x-secret", "hop");
    res.end(`hello ${req.method} ${req.url}`);
  });
  const wss = new WebSocketServer({ noServer: true }).on("connection", (ws) => ws.on("message", (m, binary) => ws.send(m, { binary })));
  upstream.on("upgrade", (req, socket, head) => {
    // Switches, then hangs up: what a container that dies mid-WebSocket does.
    if (req.url === "/switch-then-close")
      return void socket.write("HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: raw\r\n\r\n", () => setTimeout(() => socket.end(), 50));
    // Switches late, then answers with every byte it got once the client has ended its side.
    if (req.url === "/late-switch")
      return void setTimeout(() => {
        socket.write("HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: raw\r\n\r\n");
        let got = head.toString();
        socket.on("data", (c: Buffer) => (got += c.toString()));
        socket.on("end", () => socket.end(`got:${got}`));
      }, 100);
    // Switches and keeps talking, as a notebook's kernel channel does.
    if (req.url === "/held") {
      socket.write("HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: raw\r\n\r\n");
      heldOpen++;
      const ping = setInterval(() => socket.write("ping"), 100);
      socket.on("error", () => {});
      return void socket.on("close", () => (heldOpen--, clearInterval(ping)));
    }
    if (req.url === "/refuse") return void socket.end("HTTP/1.1 426 Upgrade Required\r\nconnection: close\r\ncontent-length: 7\r\n\r\nrefused");
    const cookies = TOSSED_COOKIES.map((c) => `set-cookie: ${c}\r\n`).join("");
    if (req.url === "/cookie-switch") {
      socket.on("error", () => {});
      socket.on("end", () => socket.destroy());
      return void socket.write(`HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: raw\r\n${cookies}\r\n`);
    }
    if (req.url === "/cookie-refuse") return void socket.end(`HTTP/1.1 403 Forbidden\r\n${cookies}content-length: 2\r\n\r\nno`);
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit("connection", ws, req));
  });
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
  upstreamPort = (upstream.address() as AddressInfo).port;
  routes.app = { kind: "ok", target: { deploymentId: "dep_1", nodeId: "node_1", port: upstreamPort } };
  routes.moving = { kind: "ok", target: { deploymentId: "dep_3", nodeId: "node_1", port: upstreamPort } };
  routes.slowdial = { kind: "ok", target: { deploymentId: "dep_slow", nodeId: "node_1", port: upstreamPort } };

  const gateway = testGateway();
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
/** Opens a plain TCP connection to the local server standing in for the container. */
function dial(t: EndpointTarget) {
  return new Promise<Duplex>((resolve, reject) => {
    dials++;
    const s = net.connect(t.port, "127.0.0.1");
    s.once("connect", () => resolve(asSocketLike(s)));
    s.once("error", () => reject(new DialError("port_not_ready", `nothing listens on port ${t.port}`)));
  });
}

function testGateway(timeouts: Partial<GatewayTimeouts> = {}) {
  return createGateway({
    domain: "gw.test",
    secure: true,
    log: createLogger("silent"),
    timeouts: { responseMs: 1_000, idleMs: 5_000, ...timeouts },
    resolver: { resolve: async (label) => routes[label.split("-")[0]!] ?? { kind: "unknown_host" } },
    dialer: {
      // A node far away (dep_slow): its tunnels take 400 ms to open.
      dial: (t: EndpointTarget) => (t.deploymentId === "dep_slow" ? new Promise((r) => setTimeout(r, 400)).then(() => dial(t)) : dial(t)),
    },
  });
}

afterAll(async () => {
  for (const front of fronts) front.closeAllConnections();
  upstream.closeAllConnections();
  await Promise.all(fronts.map((front) => new Promise((r) => front.close(r))));
  await new Promise((r) => upstream.close(r));
});

let frontPort = 0;
function get(host: string, path: string, init: { method?: string; body?: Buffer | string; headers?: Record<string, string>; agent?: http.Agent } = {}) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port: frontPort, path, method: init.method ?? "GET", headers: { host, ...init.headers }, agent: init.agent },
      (res) => {
        const parts: Buffer[] = [];
        res.on("data", (c: Buffer) => parts.push(c));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(parts) }));
      },
    );
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

  it("keeps a container's cookies to its own host: Domain attributes go, nothing else changes", () => {
    expect(hostOnlyCookie("sid=1; Domain=gw.test; Path=/; Secure")).toBe("sid=1; Path=/; Secure");
    expect(hostOnlyCookie("sid=1;domain=.gw.test")).toBe("sid=1");
    expect(hostOnlyCookie("sid=1; DOMAIN = gw.test ; HttpOnly")).toBe("sid=1; HttpOnly");
    // A value may hold "domain=": only attributes after the first ';' are read.
    expect(hostOnlyCookie("note=domain=x; Path=/")).toBe("note=domain=x; Path=/");
    expect(hostOnlyCookie("plain=1; Path=/")).toBe("plain=1; Path=/");
  });

  it("drops hop-by-hop headers and adds X-Forwarded-*", () => {
    const h = forwardRequestHeaders(
      { connection: "keep-alive, x-private", "x-private": "1", "keep-alive": "5", te: "trailers", accept: "*/*", "x-forwarded-for": "1.2.3.4" },
      { ip: "5.6.7.8", proto: "https", host: "a.gw.test" },
    );
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

  it("lets no container set a cookie beyond its own endpoint host", async () => {
    const r = await get("app-1.gw.test", "/cookies");
    expect(r.status).toBe(200);
    expect(r.headers["set-cookie"]).toEqual(["toss=1; Path=/; Secure", "mine=2; path=/; HttpOnly", "odd=3;SameSite=Lax", "v=a=b"]);
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
    const text = await exchange(
      "POST /echo HTTP/1.1\r\nHost: app-1.gw.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: app-1.gw.test\r\n\r\n",
    );
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

  it("passes header bytes outside ASCII through unchanged, both ways", async () => {
    const name = Buffer.from("José", "utf8");
    const text = await exchangeBytes(
      Buffer.concat([Buffer.from("GET /raw-header HTTP/1.1\r\nHost: app-1.gw.test\r\nX-Name: "), name, Buffer.from("\r\nConnection: close\r\n\r\n")]),
    );
    // Node reads header values as latin1: the same bytes give the same string.
    expect(seen.at(-1)!["x-name"]).toBe(name.toString("latin1"));
    expect(text).toContain(`filename="${Buffer.from("résumé.pdf").toString("latin1")}"`);
    expect(text).toMatch(/\r\n\r\nok$/);
  });

  it("answers 502 for a status under 100 and survives a control character in the reason", async () => {
    const odd = await get("app-1.gw.test", "/status-99");
    expect(odd.status).toBe(502);
    expect(odd.body.toString()).toContain("status 99");
    const reason = await get("app-1.gw.test", "/bad-reason");
    expect(reason.status).toBe(200);
    expect(reason.body.toString()).toBe("ok");
    // Both modes: an HTTP/1.0 request always takes Node's HTTP path.
    expect(await exchange("GET /status-99 HTTP/1.0\r\nHost: app-1.gw.test\r\n\r\n")).toMatch(/^HTTP\/1\.1 502 /);
  });

  it("dials again after a container closes its connection, and answers in HTTP/1.1 for an HTTP/1.0 container", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const bye = await get("app-1.gw.test", "/close-after", { agent });
    expect(bye.body.toString()).toBe("bye");
    // A POST cannot be sent twice: it must go on a new tunnel the first time.
    const posted = await get("app-1.gw.test", "/echo", { agent, method: "POST", body: "12345" });
    expect(JSON.parse(posted.body.toString())).toEqual({ bytes: 5, method: "POST" });
    const old = await get("app-1.gw.test", "/old", { agent });
    expect(old.body.toString()).toBe("old");
    const after = await get("app-1.gw.test", "/echo", { agent, method: "POST", body: "123" });
    expect(JSON.parse(after.body.toString())).toEqual({ bytes: 3, method: "POST" });
    agent.destroy();
    const text = await exchange("GET /old HTTP/1.1\r\nHost: app-1.gw.test\r\nConnection: close\r\n\r\n");
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  });

  it("keeps one tunnel per client connection whatever the method, and a new one for the next endpoint", async () => {
    // Both front ends follow forwarding.ts: a connection's requests share its tunnel, a POST's too.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const before = dials;
    for (const method of ["GET", "POST", "GET", "POST"]) {
      const r = await get("app-1.gw.test", "/echo", { agent, method, body: method === "POST" ? "abc" : undefined });
      expect(JSON.parse(r.body.toString())).toEqual({ bytes: method === "POST" ? 3 : 0, method });
    }
    expect(dials - before).toBe(1);
    expect((await get("app-2.gw.test", "/other", { agent })).status).toBe(200);
    expect(dials - before).toBe(2);
    agent.destroy();
  });

  it("bounds the wait for a request sent again after its kept-alive tunnel was dropped", async () => {
    dropThenHang = 0;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    expect((await get("app-1.gw.test", "/warm", { agent })).status).toBe(200);
    const r = await get("app-1.gw.test", "/drop-then-hang", { agent });
    agent.destroy();
    expect(dropThenHang).toBe(2);
    expect(r.status).toBe(504);
  });

  it("serves HTTP/1.0 clients without chunked bodies they cannot read", async () => {
    const text = await exchange("GET /sse HTTP/1.0\r\nHost: app-1.gw.test\r\n\r\n");
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(text).not.toMatch(/transfer-encoding/i);
    expect(text).toMatch(/\r\n\r\ndata: tick 0\n\ndata: tick 1\n\ndata: tick 2\n\n$/);
  });

  it("looks the endpoint up again for a kept-alive connection whose container went away", async () => {
    const saved = routes.moving!;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect((await get("moving-1.gw.test", "/before", { agent })).status).toBe(200);
      routes.moving = { kind: "not_running" };
      upstream.closeAllConnections(); // the container stopped: its connections end
      await new Promise((r) => setTimeout(r, 50));
      const r = await get("moving-1.gw.test", "/after", { agent });
      expect(r.status).toBe(404);
      expect(r.body.toString()).toContain("stopped or was deleted");
    } finally {
      routes.moving = saved;
      agent.destroy();
    }
  });
});

// What only the relay does: Node's HTTP server hands a connection away at an
// upgrade whatever the answer, and drops unanswered requests at a half-close.
describe("gateway (relay) connections", () => {
  beforeAll(() => {
    frontPort = ports.relay;
  });

  it("sends pipelined requests after a refused upgrade on, and survives a WebSocket whose container hangs up", async () => {
    const host = "Host: app-1.gw.test\r\n";
    const text = await exchange(
      `GET /refuse HTTP/1.1\r\n${host}Connection: Upgrade\r\nUpgrade: something\r\n\r\nGET /last HTTP/1.1\r\n${host}Connection: close\r\n\r\n`,
    );
    expect(text).toMatch(/^HTTP\/1\.1 426 Upgrade Required\r\n/);
    expect(text).toMatch(/refused/);
    expect(text).toMatch(/hello GET \/last$/);
    // The client writes on after the container has hung up: the gateway must neither crash nor hang.
    const switched = await new Promise<string>((resolve, reject) => {
      const s = net.connect({ port: frontPort, host: "127.0.0.1", allowHalfOpen: true }, () =>
        s.write(`GET /switch-then-close HTTP/1.1\r\n${host}Connection: Upgrade\r\nUpgrade: raw\r\n\r\n`),
      );
      let got = "";
      s.on("data", (c) => (got += c.toString("latin1")));
      s.on("end", () => {
        s.write("more bytes after the other side hung up", () => setTimeout(() => (s.destroy(), resolve(got)), 100));
      });
      s.on("error", reject);
    });
    expect(switched).toMatch(/^HTTP\/1\.1 101 /);
    expect((await get("app-1.gw.test", "/still-up")).status).toBe(200);
  });

  it("answers what came before a half-close, a request for another host among it", async () => {
    const text = await exchange("GET /first HTTP/1.1\r\nHost: app-1.gw.test\r\n\r\nGET / HTTP/1.1\r\nHost: gw.test\r\n\r\n", { halfClose: true });
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*hello GET \/first/);
    // The relay cannot put bytes back on a stream that has ended, so the API request goes unanswered:
    // Node's HTTP server, for its part, drops every request still unanswered at a half-close.
    expect(text).not.toMatch(/the API/);
  });

  /** A front of its own, with the gateway's timeouts shortened; `sockets` are its side of each connection. */
  async function ownFront(timeouts: Partial<GatewayTimeouts>) {
    const gateway = testGateway(timeouts);
    const front = http.createServer((req, res) => (gateway.owns(req.headers.host) ? void gateway.handleRequest(req, res) : res.end("the API")));
    front.on("upgrade", (req, socket, head) => void gateway.handleUpgrade(req, socket, head));
    gateway.intercept(front);
    const sockets: net.Socket[] = [];
    front.on("connection", (s: net.Socket) => sockets.push(s));
    await new Promise<void>((r) => front.listen(0, "127.0.0.1", r));
    const port = (front.address() as AddressInfo).port;
    const connections = () => new Promise<number>((r) => front.getConnections((_e, n) => r(n)));
    const close = () => (gateway.close(), new Promise((r) => front.close(r)));
    return { gateway, front, port, sockets, connections, close };
  }

  /** Runs `body` against a front of its own, closed after whatever happens. */
  async function withFront(timeouts: Partial<GatewayTimeouts>, body: (f: Awaited<ReturnType<typeof ownFront>>) => Promise<void>) {
    const f = await ownFront(timeouts);
    try {
      await body(f);
    } finally {
      await f.close();
    }
  }

  /** An API request first: the connection is Node's HTTP server's from then on, and so is an upgrade on it. */
  async function onHttpPath(c: ReturnType<typeof client>) {
    c.s.write("GET / HTTP/1.1\r\nHost: gw.test\r\n\r\n");
    await until(() => c.got.endsWith("the API"));
  }

  /** A raw client: what it has read so far, and a promise for when the server has sent its end. */
  function client(port: number, o: { allowHalfOpen?: boolean } = {}) {
    const s = net.connect({ port, host: "127.0.0.1", allowHalfOpen: o.allowHalfOpen ?? false });
    const c = { s, got: "", ended: new Promise<void>((r) => s.once("end", r)) };
    s.on("data", (b: Buffer) => (c.got += b.toString("latin1")));
    s.on("error", () => {});
    return c;
  }
  const until = async (what: () => boolean | Promise<boolean>, ms = 3_000) => {
    for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 20))) if (await what()) return;
    throw new Error("timed out waiting");
  };

  it("closes a connection idle between requests, and all of them when the gateway closes", async () => {
    const f = await ownFront({ keepAliveMs: 200 });
    const open = (path: string) =>
      new Promise<net.Socket>((resolve) => {
        const s = net.connect(f.port, "127.0.0.1", () => s.write(`GET ${path} HTTP/1.1\r\nHost: app-1.gw.test\r\n\r\n`));
        s.once("data", () => resolve(s));
        s.on("error", () => {}); // closing the gateway resets it: that is the point
      });
    const idle = await open("/idle");
    const closedAt = Date.now();
    await new Promise((r) => idle.once("close", r));
    expect(Date.now() - closedAt).toBeGreaterThanOrEqual(150);
    // A connection in the middle of a slow request still holds the listener; closing the gateway lets it go.
    const busy = await open("/hello").then((s) => (s.write("GET /slow HTTP/1.1\r\nHost: app-1.gw.test\r\n\r\n"), s));
    const closed = f.close();
    const done = await Promise.race([closed.then(() => "closed"), new Promise((r) => setTimeout(() => r("still open"), 500))]);
    expect(done).toBe("closed");
    await new Promise((r) => (busy.destroyed ? r(null) : busy.once("close", r)));
  });

  it("lets a connection go when it is done, even if the client never ends its side", async () => {
    await withFront({ keepAliveMs: 200 }, async (f) => {
      const asked = client(f.port, { allowHalfOpen: true });
      asked.s.write("GET /hello HTTP/1.1\r\nHost: app-1.gw.test\r\nConnection: close\r\n\r\n");
      const quiet = client(f.port, { allowHalfOpen: true });
      quiet.s.write("GET /hello HTTP/1.1\r\nHost: app-1.gw.test\r\n\r\n");
      await Promise.all([asked.ended, quiet.ended]); // the second after keepAliveMs
      expect(asked.got).toMatch(/hello GET \/hello$/);
      await until(async () => (await f.connections()) === 0);
    });
  });

  it("keeps a container's cookies to its host whichever path and status carries them", async () => {
    const cases = [
      { path: "/cookies-error", upgrade: false, status: 500 },
      { path: "/cookie-switch", upgrade: true, status: 101 },
      { path: "/cookie-refuse", upgrade: true, status: 403 },
    ];
    for (const port of [ports.relay, ports.http])
      for (const afterApi of [false, true])
        for (const c of cases) {
          const where = `port ${port === ports.relay ? "relay" : "http"}, ${afterApi ? "after an API request" : "fresh"}, ${c.path}`;
          const cl = client(port);
          if (afterApi) await onHttpPath(cl);
          const from = cl.got.length;
          cl.s.write(`GET ${c.path} HTTP/1.1\r\nHost: app-1.gw.test\r\n${c.upgrade ? "Connection: Upgrade\r\nUpgrade: raw\r\n" : ""}\r\n`);
          await until(() => cl.got.includes("\r\n\r\n", from));
          const head = cl.got.slice(from, cl.got.indexOf("\r\n\r\n", from));
          cl.s.destroy();
          expect(head, where).toMatch(new RegExp(`^HTTP/1\\.1 ${c.status} `));
          expect(
            [...head.matchAll(/^set-cookie: (.*)$/gim)].map((m) => m[1]),
            where,
          ).toEqual(HOST_ONLY_COOKIES);
        }
  });

  it("answers a large upload it cannot deliver with its page, reading the body before it closes", async () => {
    const size = 2 * 1024 * 1024;
    const head = `POST /echo HTTP/1.1\r\nHost: closed-1.gw.test\r\nContent-Length: ${size}\r\n\r\n`;
    const tries = await Promise.all(Array.from({ length: 10 }, () => upload(ports.relay, head, size, 2)));
    for (const t of tries) {
      expect(t.error).toBeUndefined();
      expect(t.reply).toMatch(/^HTTP\/1\.1 502 /);
    }
  });

  it("lets an upgraded connection go when its container hangs up, on the HTTP path too", async () => {
    await withFront({}, async (f) => {
      const c = client(f.port, { allowHalfOpen: true });
      await onHttpPath(c);
      c.s.write("GET /switch-then-close HTTP/1.1\r\nHost: app-1.gw.test\r\nConnection: Upgrade\r\nUpgrade: raw\r\n\r\n");
      await c.ended;
      expect(c.got).toMatch(/HTTP\/1\.1 101 /);
      await until(async () => (await f.connections()) === 0);
    });
  });

  it("ends the tunnel of an upgrade whose client reset while it was being opened", async () => {
    await withFront({}, async (f) => {
      const c = client(f.port);
      await onHttpPath(c);
      c.s.write("GET /held HTTP/1.1\r\nHost: slowdial-1.gw.test\r\nConnection: Upgrade\r\nUpgrade: raw\r\n\r\n");
      await new Promise((r) => setTimeout(r, 50));
      c.s.resetAndDestroy(); // during the 400 ms dial
      await new Promise((r) => setTimeout(r, 700));
      expect(heldOpen).toBe(0);
    });
  });

  it("reads no more than a head's worth ahead while requests wait, and answers them after", async () => {
    await withFront({}, async (f) => {
      const c = client(f.port);
      const size = 8 * 1024 * 1024;
      c.s.write("GET /slow-close HTTP/1.1\r\nHost: app-1.gw.test\r\n\r\n");
      // Its response says the tunnel closes after it: the POST waits for a new one.
      await until(() => c.got.endsWith("part"));
      c.s.write(`POST /echo HTTP/1.1\r\nHost: app-1.gw.test\r\nContent-Length: ${size}\r\nConnection: close\r\n\r\n`);
      c.s.write(Buffer.alloc(size, 1));
      await new Promise((r) => setTimeout(r, 250)); // the first response is still coming
      expect(f.sockets[0]!.bytesRead).toBeLessThan(1024 * 1024);
      await c.ended;
      expect(c.got).toMatch(/partrest/);
      expect(c.got).toContain(`{"bytes":${size},"method":"POST"}`);
    });
  });

  it("waits for a slow tunnel without the keep-alive timeout cutting the request", async () => {
    await withFront({ keepAliveMs: 200 }, async (f) => {
      const c = client(f.port);
      c.s.write("GET /close-after HTTP/1.1\r\nHost: slowdial-1.gw.test\r\n\r\n");
      await until(() => c.got.endsWith("bye"));
      // The container closed that tunnel: this request needs a new one, 400 ms away.
      c.s.write("GET /next HTTP/1.1\r\nHost: slowdial-1.gw.test\r\nConnection: close\r\n\r\n");
      await c.ended;
      expect(c.got).toMatch(/hello GET \/next$/);
    });
  });

  it("carries bytes sent before the switch and the client's end to an upgraded container", async () => {
    const text = await exchange("GET /late-switch HTTP/1.1\r\nHost: app-1.gw.test\r\nConnection: Upgrade\r\nUpgrade: raw\r\n\r\nearly bytes", {
      halfClose: true,
    });
    expect(text).toMatch(/^HTTP\/1\.1 101 /);
    expect(text).toMatch(/got:early bytes$/);
  });

  it("answers a request read before the client's end, behind a response that closes its tunnel", async () => {
    const c = client(ports.relay, { allowHalfOpen: true });
    c.s.write("GET /slow-close HTTP/1.1\r\nHost: app-1.gw.test\r\n\r\n");
    await until(() => c.got.endsWith("part"));
    c.s.end("GET /after HTTP/1.1\r\nHost: app-1.gw.test\r\n\r\n");
    await c.ended;
    expect(c.got).toMatch(/partrest/);
    expect(c.got).toMatch(/hello GET \/after$/);
  });

  it("cuts a next request head that trickles in too slowly", async () => {
    await withFront({ keepAliveMs: 200, headersMs: 300 }, async (f) => {
      const c = client(f.port);
      c.s.write("GET /first HTTP/1.1\r\nHost: app-1.gw.test\r\n\r\n");
      await until(() => c.got.endsWith("hello GET /first"));
      const started = Date.now();
      const head = "GET /slowly HTTP/1.1\r\nHost: app-1.gw.test\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
      const drip = setInterval(() => c.s.writable && c.s.write(head[Math.floor((Date.now() - started) / 50)] ?? ""), 50);
      await c.ended;
      clearInterval(drip);
      expect(Date.now() - started).toBeLessThan(1_500); // the whole head would take ~4 s
      expect(c.got).toMatch(/HTTP\/1\.1 408 Request Timeout\r\n/);
    });
  });
});

/** Writes raw bytes to the gateway and reads until it closes the connection; what came back, as latin1. */
function exchange(text: string, o: { halfClose?: boolean } = {}) {
  return exchangeBytes(Buffer.from(text, "latin1"), o);
}

function exchangeBytes(bytes: Buffer, o: { halfClose?: boolean } = {}) {
  return new Promise<string>((resolve, reject) => {
    const s = net.connect(frontPort, "127.0.0.1", () => (o.halfClose ? s.end(bytes) : s.write(bytes)));
    let got = "";
    s.on("data", (c) => (got += c.toString("latin1")));
    s.on("close", () => resolve(got));
    s.on("error", reject);
    setTimeout(() => (s.destroy(), reject(new Error(`no close; got ${JSON.stringify(got)}`))), 5_000);
  });
}
