/**
 * A byte relay that also rewrites each request head as the gateway must
 * (hop-by-hop headers out, X-Forwarded-* in), for bench/relay-floor.ts. A
 * measuring device, not a proxy: it follows Content-Length bodies only and
 * passes responses through untouched.
 *
 *   node --import tsx bench/lib/head-relay.ts LISTEN_PORT TARGET_HOST TARGET_PORT
 */
import net from "node:net";

const [listen, host, port] = process.argv.slice(2);
const HEAD_END = Buffer.from("\r\n\r\n");
const DROP = new Set(["connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade"]);

const server = net.createServer((client) => {
  client.setNoDelay(true);
  const target = net.connect(Number(port), host);
  target.setNoDelay(true);
  let pending: Buffer | null = null;
  let bodyLeft = 0;
  client.on("data", (chunk: Buffer) => {
    pending = pending ? Buffer.concat([pending, chunk]) : chunk;
    while (pending && pending.length > 0) {
      if (bodyLeft > 0) {
        const n = Math.min(bodyLeft, pending.length);
        target.write(pending.subarray(0, n));
        bodyLeft -= n;
        pending = n < pending.length ? pending.subarray(n) : null;
        continue;
      }
      const end = pending.indexOf(HEAD_END);
      if (end < 0) break;
      const [requestLine, ...fields] = pending.toString("latin1", 0, end).split("\r\n");
      const out = [requestLine!];
      let hostHeader = "";
      for (const field of fields) {
        const colon = field.indexOf(":");
        const name = field.slice(0, colon).toLowerCase();
        const value = field.slice(colon + 1).trim();
        if (DROP.has(name)) continue;
        if (name === "host") hostHeader = value;
        if (name === "content-length") bodyLeft = Number(value);
        out.push(field);
      }
      out.push(`x-forwarded-for: ${client.remoteAddress}`, "x-forwarded-proto: http", `x-forwarded-host: ${hostHeader}`);
      target.write(`${out.join("\r\n")}\r\n\r\n`);
      pending = end + 4 < pending.length ? pending.subarray(end + 4) : null;
    }
  });
  target.pipe(client);
  client.on("error", () => target.destroy());
  target.on("error", () => client.destroy());
  client.on("close", () => target.destroy());
});
server.listen(Number(listen), "127.0.0.1", () => process.send?.((server.address() as net.AddressInfo).port));
