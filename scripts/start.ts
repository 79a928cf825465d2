/**
 * `npm start`: the whole marketplace on one machine, on the embedded database.
 * Starts the control plane; the local agent joins it when Docker is reachable.
 */
import { spawn } from "node:child_process";

const children = [spawn("npx", ["tsx", "apps/control-plane/src/index.ts"], { stdio: "inherit", env: process.env })];

const stop = (signal: NodeJS.Signals) => {
  for (const c of children) c.kill(signal);
};
process.on("SIGINT", () => stop("SIGINT"));
process.on("SIGTERM", () => stop("SIGTERM"));
for (const c of children) c.on("exit", (code) => process.exit(code ?? 0));
