// Starts the measuring relays (tcp-relay.ts, head-relay.ts) as processes of
// their own, each on a port of its own, for the endpoint benchmarks.
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";

export type RelayScript = "tcp-relay.ts" | "head-relay.ts";

/** Starts `script` relaying to host:port; resolves with the port it listens on. */
export async function startRelay(script: RelayScript, host: string, port: number): Promise<{ port: number; proc: ChildProcess }> {
  const proc = fork(fileURLToPath(new URL(`./${script}`, import.meta.url)), ["0", host, String(port)], { execArgv: ["--import", "tsx"] });
  return { port: await new Promise<number>((resolve) => proc.once("message", (m) => resolve(m as number))), proc };
}
