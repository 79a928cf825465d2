// The agent's public API, and its command line when run as a program
// (`npm run agent -- ...` runs `tsx apps/agent/src/index.ts`).
import { spawn } from "node:child_process";
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
    relaunch,
  });
  // Docker `wait` requests of watched containers would keep the event loop alive.
  process.exit(exitCode);
}

/** This command line again, in a Node started with `env` (tsx's loader, when run so, comes with execArgv). */
function relaunch(env: Record<string, string | undefined>): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], { env, stdio: "inherit" });
    // The child is the agent now: it gets the signals and decides the exit code.
    const pass = (signal: NodeJS.Signals) => child.kill(signal);
    process.on("SIGTERM", pass);
    process.on("SIGINT", pass);
    child.once("error", (error) => {
      process.stderr.write(`cm-agent: cannot start ${process.execPath} again with the config file's Node settings: ${error.message}\n`);
      resolve(1);
    });
    child.once("exit", (code, signal) => resolve(code ?? 128 + (signal === "SIGKILL" ? 9 : signal === "SIGINT" ? 2 : 15)));
  });
}
