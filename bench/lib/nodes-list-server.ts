// Child process for bench/nodes-list.ts: one server kind per process, so the
// load generator and the server do not share an event loop.

import { rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { createPgDatabase } from "@cm/db/testing";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { testConfig } from "../../apps/control-plane/src/config";
import { createDeps } from "../../apps/control-plane/src/deps";
import { startServer } from "../../apps/control-plane/src/server";
import { createLogger } from "../../apps/control-plane/src/services/logger";
import { seedNodes, seedUptimeHistory } from "./seed-nodes";

// The parent ends a server with SIGINT; exiting from a handler lets --cpu-prof write its profile.
let cleanup = async () => {};
const end = () => void cleanup().finally(() => process.exit(0));
process.on("SIGINT", end);
process.on("disconnect", end);

const kind = process.argv[2];
if (kind === "same-body") {
  // The floor: Hono answering each path with the bytes the catalogue answered it with, as JSON.
  const { bodies } = await new Promise<{ bodies: Record<string, string> }>((resolve) => process.once("message", resolve as never));
  const app = new Hono().get("/nodes", (c) => {
    const url = c.req.url;
    const body = bodies[url.slice(url.indexOf("/", url.indexOf("//") + 2))];
    return body === undefined ? c.notFound() : c.body(body, 200, { "content-type": "application/json" });
  });
  const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => {
    process.send!({ url: `http://127.0.0.1:${(s.address() as AddressInfo).port}` });
  });
} else {
  const file = `/tmp/cm-bench-${process.pid}.db`;
  const pg = kind === "postgres" ? await createPgDatabase() : undefined;
  // No node goes offline while the bench runs: the heartbeat monitor marking 7,500 seeded nodes offline one
  // by one (30 s after the start) changed the catalogue, and cleared its cache, all through the measurement.
  const config = testConfig({ DATABASE_URL: pg?.url ?? `file:${file}`, LOG_LEVEL: "silent", HEARTBEAT_INTERVAL_MS: 3_600_000 });
  const deps = await createDeps(config, { log: createLogger("silent") });
  cleanup = async () => {
    await deps.close();
    if (pg) await pg.drop();
    else for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
  };
  await seedNodes(deps, 10_000, { onlineAtMs: Date.now() });
  // A miss sums its page's uptime: with no history that read costs nothing, with 30 days of hours 3-5 ms.
  await seedUptimeHistory(pg?.url ?? `file:${file}`, { newest: 1000, nowMs: Date.now() });
  const s = await startServer(deps, { port: 0, host: "127.0.0.1" });
  process.send!({ url: s.url });
}
