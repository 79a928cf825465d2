import { type ChildProcess, spawn } from "node:child_process";
import readline from "node:readline";

/** A node child (tsx) under the highest open-files limit allowed; every stdout line is JSON for onLine, anything else passed to stderr. */
export function jsonChild(file: string, args: Array<string | number>, onLine: (msg: any) => void): ChildProcess {
  const cmd = `ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec node --import tsx ${file} ${args.join(" ")}`;
  const p = spawn("sh", ["-c", cmd], { stdio: ["ignore", "pipe", "inherit"] });
  readline.createInterface({ input: p.stdout! }).on("line", (line) => {
    try {
      onLine(JSON.parse(line));
    } catch {
      process.stderr.write(line + "\n");
    }
  });
  return p;
}

/** SIGTERM, resolved once it exited. */
export function stopChild(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    p.once("exit", () => resolve());
    p.kill("SIGTERM");
  });
}
