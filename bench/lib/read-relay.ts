/**
 * A relay process for bench/read-buffer.ts: accepts TCP and carries it to a
 * target, the target's bytes either piped (Node allocates a buffer per read)
 * or read into one reused buffer (the agent's ReusedBufferReader).
 *
 *   node --import tsx bench/lib/read-relay.ts pipe|reused TARGET_PORT
 */
import net from "node:net";
import { ReusedBufferReader } from "../../apps/agent/src/tunnel/reused-buffer-reader";

const [mode, port] = process.argv.slice(2);
const server = net.createServer((client) => {
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
});
server.listen(0, "127.0.0.1", () => process.send?.((server.address() as net.AddressInfo).port));
