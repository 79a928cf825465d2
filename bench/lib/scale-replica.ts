// Child process of bench/replica-scale.ts: one control-plane replica on the
// shared PostgreSQL database (SCALE_DB_URL), listening on SCALE_PORT where the
// other replicas reach it, with every periodic task on its real timer. Tells
// the parent `{ url, pid }` over IPC; SIGTERM closes it.
import { testConfig } from "../../apps/control-plane/src/config";
import { createDeps } from "../../apps/control-plane/src/deps";
import { startServer } from "../../apps/control-plane/src/server";

const port = Number(process.env.SCALE_PORT);
const deps = await createDeps(
  testConfig({
    DATABASE_URL: process.env.SCALE_DB_URL!,
    LOG_LEVEL: "error",
    HEARTBEAT_INTERVAL_MS: 10_000,
    AUTH_RATE_LIMIT_PER_MIN: 100_000,
    ACCESS_TOKEN_TTL_S: 3600,
    REPLICA_ADDRESS: `http://127.0.0.1:${port}`,
    REPLICA_SECRET: process.env.SCALE_REPLICA_SECRET!,
  }),
);
const server = await startServer(deps, { port, host: "127.0.0.1" });
process.send!({ url: server.url, pid: process.pid });
process.on("SIGTERM", async () => {
  await server.close();
  await deps.close();
  process.exit(0);
});
