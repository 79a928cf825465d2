/**
 * The least any relay process can do: accept TCP and pipe bytes to a target,
 * nothing parsed. Two of these chained in front of a container are the floor
 * for the endpoint path (gateway process + agent process) on one machine.
 *
 *   node --import tsx bench/lib/tcp-relay.ts LISTEN_PORT TARGET_HOST TARGET_PORT
 */
import net from "node:net";

const [listen, host, port] = process.argv.slice(2);
const server = net.createServer((client) => {
  client.setNoDelay(true);
  const target = net.connect(Number(port), host);
  target.setNoDelay(true);
  client.pipe(target).pipe(client);
  client.on("error", () => target.destroy());
  target.on("error", () => client.destroy());
});
server.listen(Number(listen), "127.0.0.1", () => process.send?.((server.address() as net.AddressInfo).port));
