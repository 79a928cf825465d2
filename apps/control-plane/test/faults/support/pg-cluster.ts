import { execFileSync } from "node:child_process";
import { chownSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { postgresBin } from "@cm/testkit/pieces";
import { runProgram } from "@cm/testkit/run-program";

const PG_BIN = postgresBin();

/** A free TCP port on 127.0.0.1, as the kernel hands one out for port 0. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** Runs a PostgreSQL binary as the `postgres` OS user (initdb and the server refuse root). */
async function asPostgres(bin: string, args: string[]): Promise<void> {
  const quoted = [join(PG_BIN, bin), ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ");
  const asRoot = process.getuid?.() === 0;
  await runProgram(asRoot ? "su" : "bash", asRoot ? ["postgres", "-s", "/bin/bash", "-c", quoted] : ["-c", quoted]);
}

export type PgCluster = Awaited<ReturnType<typeof startPgCluster>>;

/**
 * A PostgreSQL cluster of the test's own (initdb into a temp directory, a free
 * port, trust auth on 127.0.0.1): the test stops and starts it at will without
 * touching the machine's main cluster, which other suites use.
 */
export async function startPgCluster() {
  const dir = mkdtempSync(join(tmpdir(), "cm-fault-pg-"));
  const data = join(dir, "data");
  if (process.getuid?.() === 0)
    chownSync(dir, Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" })), Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" })));
  await asPostgres("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
  const port = await freePort();
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off`;
  const start = () => asPostgres("pg_ctl", ["-D", data, "-o", options, "-l", join(dir, "server.log"), "-w", "-t", "30", "start"]);
  // fast: open sessions are cut at once, as when the database host goes away.
  const stop = () => asPostgres("pg_ctl", ["-D", data, "-m", "fast", "-w", "-t", "30", "stop"]);
  // The server and its backends, frozen or thawed: a database host that hangs
  // (connections open, no answer) rather than one that refuses.
  const processes = () => {
    const postmaster = Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]);
    const children = execFileSync("pgrep", ["-P", String(postmaster)], { encoding: "utf8" })
      .split("\n")
      .filter(Boolean)
      .map(Number);
    return [postmaster, ...children];
  };
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start,
    stop,
    freeze: () => {
      for (const pid of processes()) process.kill(pid, "SIGSTOP");
    },
    thaw: () => {
      for (const pid of processes()) process.kill(pid, "SIGCONT");
    },
    async destroy() {
      try {
        for (const pid of processes()) process.kill(pid, "SIGCONT"); // a test that failed while it was frozen
      } catch {
        // not running
      }
      try {
        await asPostgres("pg_ctl", ["-D", data, "-m", "immediate", "-w", "-t", "30", "stop"]);
      } catch {
        // already stopped
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
