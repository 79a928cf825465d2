// Runs inside the test container (node copied in from the host): the kinds of
// traffic a notebook or model server sees, on port 8080.
import http from "node:http";
import { WebSocketServer } from "ws";

// Cookies set for the domain every endpoint and the API share (what a gateway must keep to the endpoint's host).
const TOSSED_COOKIES = ["toss=1; Domain=localhost; Path=/", "up=2; domain=.LOCALHOST"];

// QUIET_REQUESTS=1 (the endpoint benchmark): no line per request, so the
// benchmark measures the proxy path, not log shipping.
const logRequests = !process.env.QUIET_REQUESTS;

const server = http.createServer((req, res) => {
  if (logRequests) console.log(`request ${req.method} ${req.url} xff=${req.headers["x-forwarded-for"] ?? ""} proto=${req.headers["x-forwarded-proto"] ?? ""}`);
  if (req.url === "/echo") {
    let bytes = 0;
    req.on("data", (c) => (bytes += c.length));
    req.on("end", () => res.end(JSON.stringify({ bytes, method: req.method })));
    return;
  }
  if (req.url === "/headers") return void res.end(JSON.stringify(req.headers));
  if (req.url === "/big" || req.url.startsWith("/big?mib=")) {
    // 16 MiB, or as many MiB as asked (the endpoint benchmark's large transfer).
    res.writeHead(200, { "content-type": "application/octet-stream" });
    const chunk = Buffer.alloc(64 * 1024, 7);
    let left = 16 * (Number(req.url.split("=")[1]) || 16);
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
    res.writeHead(200, { "content-type": "text/event-stream" });
    let i = 0;
    const t = setInterval(() => {
      res.write(`data: tick ${i++}\n\n`);
      if (i === 3) {
        clearInterval(t);
        res.end();
      }
    }, 150);
    return;
  }
  if (req.url === "/slow") return void setTimeout(() => res.end("slow"), 2_000);
  if (req.url === "/cookies" || req.url === "/cookies-error") {
    res.writeHead(req.url === "/cookies" ? 200 : 500, { "set-cookie": TOSSED_COOKIES });
    return void res.end("cookies");
  }
  res.end("hello from the container");
});
const wss = new WebSocketServer({ noServer: true }).on("connection", (ws) => ws.on("message", (m, binary) => ws.send(m, { binary })));
// /cookie-ws: a 101 that sets cookies; /cookie-refuse: an upgrade refused with a 403 that sets them.
wss.on("headers", (headers, req) => req.url === "/cookie-ws" && headers.push(...TOSSED_COOKIES.map((c) => `Set-Cookie: ${c}`)));
server.on("upgrade", (req, socket, head) => {
  if (req.url !== "/cookie-refuse") return wss.handleUpgrade(req, socket, head, (ws) => wss.emit("connection", ws, req));
  const cookies = TOSSED_COOKIES.map((c) => `Set-Cookie: ${c}\r\n`).join("");
  socket.end(`HTTP/1.1 403 Forbidden\r\n${cookies}Content-Length: 2\r\nConnection: close\r\n\r\nno`);
});
// KEEP_ALIVE_MS: close idle keep-alive connections sooner than Node's 5 s, as
// many servers do (gunicorn: 2 s), so tests see it happen.
if (process.env.KEEP_ALIVE_MS) server.keepAliveTimeout = Number(process.env.KEEP_ALIVE_MS);
server.listen(8080, () => console.log("listening on 8080"));
let n = 0;
// TICK_MS: a log line this often (200 ms: what the log tests read); 0 for none (bench/agent-idle.ts: a quiet deployment).
const tickMs = Number(process.env.TICK_MS ?? 200);
if (tickMs > 0) setInterval(() => console.log(`tick ${n++}`), tickMs);
// IGNORE_SIGTERM=1: a container slow to stop (its engine kills it after the stop timeout), as many are.
process.on("SIGTERM", () => process.env.IGNORE_SIGTERM || process.exit(0));
