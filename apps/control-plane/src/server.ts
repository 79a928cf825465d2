import { serve, type ServerType } from "@hono/node-server";
import type { AddressInfo } from "node:net";
import { createApp } from "./app";
import type { Deps } from "./deps";

export type RunningServer = { url: string; port: number; server: ServerType; close(): Promise<void> };

/** Binds the app (port 0 picks a free one, as the tests do) and answers how to reach and stop it. */
export async function startServer(deps: Deps, opts: { port: number; host: string }): Promise<RunningServer> {
  const { app } = createApp(deps);
  const server = await new Promise<ServerType>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port: opts.port, hostname: opts.host }, () => resolve(s));
    s.once("error", reject);
  });
  const port = (server.address() as AddressInfo).port;
  deps.setListenPort(port);
  const host = opts.host.includes(":") ? `[${opts.host}]` : opts.host;
  return {
    url: `http://${host}:${port}`,
    port,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      }),
  };
}
