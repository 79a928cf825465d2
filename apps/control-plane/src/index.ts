import { DatabaseInUseError, DatabaseNewerError, lockDatabase, type ProcessLock } from "@cm/db";
import { loadConfigOrExit } from "./config";
import { sqliteFile } from "./database-location";
import { createDeps } from "./deps";
import { startServer } from "./server";
import { PayoutKeypairError } from "./services/payout-keypair";
import { RegistryKeyError } from "./services/registry-secrets";

const config = loadConfigOrExit("control plane");
// One process per embedded database (several replicas need PostgreSQL): taken
// before migrating, so a second start never touches the file another one serves.
const databaseFile = sqliteFile(config.DATABASE_URL);
let lock: ProcessLock | undefined;
try {
  lock = databaseFile ? lockDatabase(databaseFile) : undefined;
} catch (error) {
  if (!(error instanceof DatabaseInUseError)) throw error;
  process.stderr.write(`control plane: ${error.message}\n`);
  process.exit(78);
}
const deps = await createDeps(config).catch((error: unknown) => {
  if (!(error instanceof PayoutKeypairError || error instanceof RegistryKeyError || error instanceof DatabaseNewerError)) throw error;
  process.stderr.write(`control plane: ${error.message}\n`);
  process.exit(78);
});
// A rolling upgrade under way: a newer release migrated the database, and this one (the release before) serves on it.
if (deps.repos.handle.newerRelease) deps.log.warn(deps.repos.handle.newerRelease);
const running = await startServer(deps, { port: config.PORT, host: config.HOST });
deps.log.info(`control plane listening on ${running.url}`, { database: config.DATABASE_URL.startsWith("postgres") ? "postgres" : "sqlite" });

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  deps.log.info(`${signal}: shutting down`);
  await running.close();
  await deps.close();
  lock?.release();
  process.exit(0);
}
process.on("SIGINT", () => void shutdown("SIGINT"));
process.on("SIGTERM", () => void shutdown("SIGTERM"));
