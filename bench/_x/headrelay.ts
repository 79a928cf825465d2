import net from "node:net";
const [listen, host, port] = process.argv.slice(2);
const CRLF2 = Buffer.from("\r\n\r\n");
net.createServer((c) => {
  c.setNoDelay(true);
  const t = net.connect(Number(port), host); t.setNoDelay(true);
  let buf: Buffer | null = null; let bodyLeft = 0;
  c.on("data", (chunk: Buffer) => {
    buf = buf ? Buffer.concat([buf, chunk]) : chunk;
    while (buf && buf.length) {
      if (bodyLeft > 0) { const n = Math.min(bodyLeft, buf.length); t.write(buf.subarray(0, n)); bodyLeft -= n; buf = n < buf.length ? buf.subarray(n) : null; continue; }
      const end = buf.indexOf(CRLF2); if (end < 0) break;
      const head = buf.toString("latin1", 0, end);
      const lines = head.split("\r\n"); const out = [lines[0]]; let hostH = "";
      for (let i = 1; i < lines.length; i++) { const l = lines[i]!; const k = l.slice(0, l.indexOf(":")).toLowerCase(); if (k === "connection" || k === "keep-alive") continue; if (k === "host") hostH = l.slice(l.indexOf(":") + 1).trim(); if (k === "content-length") bodyLeft = Number(l.slice(l.indexOf(":") + 1)); out.push(l); }
      out.push(`x-forwarded-for: ${c.remoteAddress}`, `x-forwarded-proto: http`, `x-forwarded-host: ${hostH}`);
      t.write(out.join("\r\n") + "\r\n\r\n");
      buf = end + 4 < buf.length ? buf.subarray(end + 4) : null;
    }
  });
  t.pipe(c);
  c.on("error", () => t.destroy()); t.on("error", () => c.destroy()); c.on("close", () => t.destroy());
}).listen(Number(listen), "127.0.0.1", () => process.send?.("up"));
