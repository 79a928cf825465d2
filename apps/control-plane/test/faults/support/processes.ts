import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../../..");

export type Program = Awaited<ReturnType<typeof startProgram>>;

/**
 * One of the repository's programs in a child process of its own, run as
 * `npm run control-plane` / `npm run agent` run it (tsx), but with node as the
 * process itself: SIGSTOP and SIGKILL must reach the program, not a launcher.
 * Its output is kept (not printed) for the test to search and to explain a failure.
 */
export function startProgram(name: string, entry: string, args: string[], env: Record<string, string>, o: { cwd?: string } = {}) {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", entry, ...args], {
    // Another checkout's (a previous release's source) runs from its own root.
    cwd: o.cwd ?? REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  const take = (chunk: Buffer) => {
    for (const line of chunk.toString("utf8").split("\n")) if (line) lines.push(line);
    if (lines.length > 20_000) lines.splice(0, 5_000);
    for (const w of waiters) w();
  };
  child.stdout!.on("data", take);
  child.stderr!.on("data", take);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  let gone = false;
  void exited.then(() => {
    gone = true;
  });

  return {
    name,
    pid: child.pid!,
    lines,
    exited,
    get running() {
      return !gone;
    },
    signal(sig: NodeJS.Signals) {
      if (!gone) process.kill(child.pid!, sig);
    },
    /** Resolves with the first line (already written or still to come) that matches. */
    waitForLine(re: RegExp, timeoutMs = 30_000): Promise<string> {
      return new Promise((resolve, reject) => {
        const check = () => {
          const hit = lines.find((l) => re.test(l));
          if (hit) {
            cleanup();
            resolve(hit);
          }
        };
        const fail = (why: string) => {
          cleanup();
          reject(new Error(`${name}: no line matching ${re} ${why}; last lines:\n${lines.slice(-30).join("\n")}`));
        };
        const timer = setTimeout(() => fail(`within ${timeoutMs} ms`), timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
        void exited.then((code) => waiters.has(check) && fail(`before it exited (${code})`));
      });
    },
    /** SIGTERM, then SIGKILL after graceMs. */
    async stop(graceMs = 10_000) {
      if (gone) return;
      this.signal("SIGCONT");
      this.signal("SIGTERM");
      const timer = setTimeout(() => this.signal("SIGKILL"), graceMs);
      await exited;
      clearTimeout(timer);
    },
    tail: (n = 40) => lines.slice(-n).join("\n"),
  };
}
