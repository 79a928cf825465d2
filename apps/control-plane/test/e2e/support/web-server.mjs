// Runs inside the test container (node copied in from the host): the kinds of
// traffic a notebook or model server sees, on port 8080.
import http from "node:http";
import { WebSocketServer } from "ws";

const server = http.createServer((req, res) => {
  console.log(`request ${req.method} ${req.url} xff=${req.headers["x-forwarded-for"] ?? ""} proto=${req.headers["x-forwarded-proto"] ?? ""}`);
  if (req.url === "/echo") {
    let bytes = 0;
    req.on("data", (c) => (bytes += c.length));
    req.on("end", () => res.end(JSON.stringify({ bytes, method: req.method })));
    return;
  }
  if (req.url === "/headers") return void res.end(JSON.stringify(req.headers));
  if (req.url === "/big") {
    res.writeHead(200, { "content-type": "application/octet-stream" });
    const chunk = Buffer.alloc(64 * 1024, 7);
    let left = 256;
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
  res.end("hello from the container");
});
new WebSocketServer({ server }).on("connection", (ws) => ws.on("message", (m, binary) => ws.send(m, { binary })));
server.listen(8080, () => console.log("listening on 8080"));
let n = 0;
setInterval(() => console.log(`tick ${n++}`), 200);
process.on("SIGTERM", () => process.exit(0));
