// Child process for bench/nodes-list.ts: one server kind per process, so the
// load generator and the server do not share an event loop.

import type { AddressInfo } from "node:net";
import { createPgDatabase } from "@cm/db/testing";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { testConfig } from "../../apps/control-plane/src/config";
import { createDeps } from "../../apps/control-plane/src/deps";
import { startServer } from "../../apps/control-plane/src/server";
import { createLogger } from "../../apps/control-plane/src/services/logger";
import { seedNodes } from "./seed-nodes";

const kind = process.argv[2];
if (kind === "bare-hono") {
  const app = new Hono().get("/", (c) => c.json({ hello: "world" }));
  const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => {
    process.send!({ url: `http://127.0.0.1:${(s.address() as AddressInfo).port}` });
  });
} else {
  const url = kind === "postgres" ? (await createPgDatabase()).url : `file:/tmp/cm-bench-${process.pid}.db`;
  const deps = await createDeps(testConfig({ DATABASE_URL: url, LOG_LEVEL: "silent" }), { log: createLogger("silent") });
  await seedNodes(deps, 10_000);
  const s = await startServer(deps, { port: 0, host: "127.0.0.1" });
  process.send!({ url: s.url });
}
