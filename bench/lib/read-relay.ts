/**
 * A relay process for bench/read-buffer.ts: accepts TCP and carries it to a
 * target, the target's bytes either piped (Node allocates a buffer per read)
 * or read into one reused buffer (the agent's ReusedBufferReader).
 *
 *   node --import tsx bench/lib/read-relay.ts pipe|reused TARGET_PORT [KEY_PEM CERT_PEM]
 *
 * With a key and certificate it accepts TLS, so what it reads is written into
 * TLS, as the agent writes into a tunnel to an HTTPS control plane.
 */
import { readFileSync } from "node:fs";
import net from "node:net";
import tls from "node:tls";
import { ReusedBufferReader } from "../../apps/agent/src/tunnel/reused-buffer-reader";

const [mode, port, key, cert] = process.argv.slice(2);
const relay = (client: net.Socket) => {
  if (mode === "pipe") {
    const target = net.connect(Number(port), "127.0.0.1");
    client.pipe(target).pipe(client);
    target.on("error", () => client.destroy());
  } else {
    const reader = new ReusedBufferReader();
    const target = net.connect({ port: Number(port), host: "127.0.0.1", onread: reader.onread });
    reader.attach(target);
    reader.forwardTo(client);
    client.pipe(target);
    target.on("error", () => client.destroy());
  }
  client.on("error", () => client.destroy());
};
const server = key && cert ? tls.createServer({ key: readFileSync(key), cert: readFileSync(cert) }, relay) : net.createServer(relay);
server.listen(0, "127.0.0.1", () => process.send?.((server.address() as net.AddressInfo).port));
