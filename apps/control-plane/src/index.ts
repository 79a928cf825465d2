import { loadConfigOrExit } from "./config";
import { createDeps } from "./deps";
import { startServer } from "./server";

const config = loadConfigOrExit("control plane");
const deps = await createDeps(config);
const running = await startServer(deps, { port: config.PORT, host: config.HOST });
deps.log.info(`control plane listening on ${running.url}`, { database: config.DATABASE_URL.startsWith("postgres") ? "postgres" : "sqlite" });

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  deps.log.info(`${signal}: shutting down`);
  await running.close();
  await deps.close();
  process.exit(0);
}
process.on("SIGINT", () => void shutdown("SIGINT"));
process.on("SIGTERM", () => void shutdown("SIGTERM"));
