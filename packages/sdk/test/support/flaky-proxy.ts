import type { AddressInfo } from "node:net";
import { connect, createServer, type Server, type Socket } from "node:net";

/**
 * A TCP proxy in front of a server that a test can take down and bring back on the
 * same port: what a client sees of a control plane restarting (connections cut, then
 * refused, then answered again).
 */
export async function startFlakyProxy(target: string) {
  const { hostname, port: targetPort } = new URL(target);
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const listen = async () => {
    server = createServer((client) => {
      const upstream = connect(Number(targetPort), hostname);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on("close", () => sockets.delete(s));
        s.on("error", () => s.destroy());
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((done) => server!.listen(port, "127.0.0.1", done));
    port = (server.address() as AddressInfo).port;
  };
  const stop = async () => {
    for (const s of sockets) s.destroy();
    await new Promise((done) => server?.close(done));
    server = undefined;
  };
  await listen();
  return {
    url: `http://127.0.0.1:${port}`,
    /** Cuts every connection and refuses new ones for `downMs`, then listens again on the same port. */
    async restart(downMs: number) {
      await stop();
      await new Promise((r) => setTimeout(r, downMs));
      await listen();
    },
    close: stop,
  };
}
