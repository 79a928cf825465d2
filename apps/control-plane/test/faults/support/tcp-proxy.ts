// A TCP proxy between the agent and the control plane that can partition the
// link and heal it, as a network does: while partitioned, nothing crosses in
// either direction and neither end is told (no FIN, no RST), and connections
// opened meanwhile are accepted but carried nowhere until the link heals.
import { createServer, type Socket, connect as tcpConnect } from "node:net";

export type TcpProxy = Awaited<ReturnType<typeof startTcpProxy>>;

export async function startTcpProxy(target: { host: string; port: number }) {
  let partitioned = false;
  const pairs = new Set<{ client: Socket; upstream: Socket }>();
  const held: Socket[] = [];

  const join = (pair: { client: Socket; upstream: Socket }) => {
    pair.client.pipe(pair.upstream);
    pair.upstream.pipe(pair.client);
  };
  const split = (pair: { client: Socket; upstream: Socket }) => {
    pair.client.unpipe(pair.upstream);
    pair.upstream.unpipe(pair.client);
    pair.client.pause();
    pair.upstream.pause();
  };
  const carry = (client: Socket) => {
    const upstream = tcpConnect(target.port, target.host);
    const pair = { client, upstream };
    pairs.add(pair);
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    if (partitioned) split(pair);
    else join(pair);
  };
  const server = createServer((client) => {
    if (!partitioned) return carry(client);
    client.pause();
    client.on("error", () => client.destroy());
    held.push(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };

  return {
    url: `http://127.0.0.1:${port}`,
    /** Nothing crosses from now on, and nobody is told. */
    partition() {
      partitioned = true;
      for (const pair of pairs) split(pair);
    },
    /** The link is back: what waited crosses, connections opened meanwhile reach the control plane. */
    heal() {
      partitioned = false;
      for (const pair of pairs) join(pair);
      for (const client of held.splice(0)) if (!client.destroyed) carry(client);
    },
    async close() {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      for (const client of held.splice(0)) client.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
