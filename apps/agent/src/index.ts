// The agent's public API, and its command line when run as a program
// (`npm run agent -- ...` runs `tsx apps/agent/src/index.ts`).
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { runCli } from "./cli/main";

export type { AgentDeps } from "./agent";
export { Agent, createAgent } from "./agent";
export type { Clock } from "./clock";
export { systemClock } from "./clock";
export type { AgentConfig, AgentConfigInput, LogLevel } from "./config";
export { ConfigError, controlPlaneUrls, loadAgentConfig, parseAgentConfig } from "./config";
export type { ConnectionFailure, ConnectionState } from "./connection/connection";
export type { SocketFactory } from "./connection/socket";
export { wsSocketFactory } from "./connection/socket";
export { createDeps } from "./deps";
export type { Logger } from "./logger";
export { createLogger, silentLogger } from "./logger";
export { AGENT_VERSION } from "./version";

function isEntryPoint(): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  const exitCode = await runCli(process.argv.slice(2), {
    env: process.env,
    stdout: (line) => process.stdout.write(`${line}\n`),
    stderr: (line) => process.stderr.write(`${line}\n`),
    onSignal: (handler) => {
      const listener = (signal: NodeJS.Signals) => handler(signal);
      process.on("SIGTERM", listener);
      process.on("SIGINT", listener);
      return () => {
        // Keep swallowing repeats while the agent closes; the exit below ends the process.
        process.on("SIGTERM", () => {});
        process.on("SIGINT", () => {});
        process.off("SIGTERM", listener);
        process.off("SIGINT", listener);
      };
    },
  });
  // Docker `wait` requests of watched containers would keep the event loop alive.
  process.exit(exitCode);
}
