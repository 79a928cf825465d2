/**
 * The release's programs (npm pack, tar, node-gyp) run as awaited children, never with
 * execFileSync: the tests import these functions into a vitest worker, where a synchronous
 * child holds the worker's event loop for as long as it runs (a cross-compile, minutes), and
 * past 60 s vitest fails the whole run ("Timeout calling onTaskUpdate"). No time limit: a
 * cold cross-compile is slow on a busy machine, and the command line waits as before.
 */
import { spawn } from "node:child_process";

export interface RunOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** "pipe" (default) resolves to it as text */
  stdout?: "pipe" | "ignore";
  /**
   * "echo" (default): kept for the error's message and written on to this process's stderr,
   * as execFileSync does; "inherit": the program writes it here itself (npm's notices);
   * "keep": only kept, for the error's message and `stderr` (node-gyp's compiler output).
   */
  stderr?: "echo" | "inherit" | "keep";
}

/** An exit other than 0, with what the program said on stderr (empty where it was inherited). */
export class ProgramFailed extends Error {
  constructor(
    readonly command: string,
    readonly status: number | null,
    readonly signal: NodeJS.Signals | null,
    readonly stderr: string,
  ) {
    super(`Command failed: ${command} (${signal ? `killed by ${signal}` : `exit code ${status}`})${stderr ? `\n${stderr.trimEnd()}` : ""}`);
    this.name = "ProgramFailed";
  }
}

/** Runs `file` with `args`; resolves to its stdout ("" when ignored), rejects with ProgramFailed or spawn's error. */
export function run(file: string, args: readonly string[], options: RunOptions = {}): Promise<string> {
  const stderrMode = options.stderr ?? "echo";
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: ["ignore", options.stdout ?? "pipe", stderrMode === "inherit" ? "inherit" : "pipe"],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout?.on("data", (chunk: Buffer) => out.push(chunk));
    child.stderr?.on("data", (chunk: Buffer) => {
      err.push(chunk);
      if (stderrMode === "echo") process.stderr.write(chunk);
    });
    child.on("error", reject);
    child.on("close", (status, signal) => {
      if (status === 0) return resolve(Buffer.concat(out).toString("utf8"));
      reject(new ProgramFailed([file, ...args].join(" "), status, signal, Buffer.concat(err).toString("utf8")));
    });
  });
}
