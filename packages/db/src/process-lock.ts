// One control plane per embedded database. SQLite is the single-process default:
// two control planes on one file would each run metering, the payout sender and
// the deposit watcher, and charge every deployment twice. (PostgreSQL is the
// engine for several replicas.) `cm-admin` is meant to open the same file beside
// a running control plane, so the lock is not a lock on the database itself but
// on a small file beside it, held by the server process alone.
//
// The lock is an exclusive SQLite transaction on that file: SQLite takes it with
// a POSIX record lock, which the kernel drops when the process ends however it
// ends (SIGKILL, a power cut), so a crash never leaves a stale lock for an
// operator to delete by hand, and no pid is trusted that a later process reuses.
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";

/** Another control plane holds the database; the message says which file and what to do. */
export class DatabaseInUseError extends Error {}

export interface ProcessLock {
  readonly file: string;
  release(): void;
}

/** The lock file beside an embedded database. */
export const lockFileFor = (databaseFile: string) => `${databaseFile}.lock`;

/**
 * Takes the lock of the embedded database at `databaseFile`, or throws
 * DatabaseInUseError at once (no waiting: a second control plane should be
 * told, not hang) when another process holds it.
 */
export function lockDatabase(databaseFile: string): ProcessLock {
  const file = lockFileFor(databaseFile);
  fs.mkdirSync(path.dirname(file), { recursive: true }); // a first start: the database is made just after
  const db = new Database(file, { timeout: 0 });
  try {
    // No journal: nothing is ever written, the transaction exists only for its lock.
    db.pragma("journal_mode = OFF");
    db.exec("BEGIN EXCLUSIVE");
  } catch (error) {
    db.close();
    if ((error as { code?: string }).code === "SQLITE_BUSY")
      throw new DatabaseInUseError(
        `another control plane is running on ${databaseFile} (it holds ${file}). ` +
          "The embedded database serves one control plane process: stop the other one, or, to run several replicas, use PostgreSQL (DATABASE_URL=postgres://...).",
      );
    throw error;
  }
  let held = true;
  return {
    file,
    release() {
      if (!held) return;
      held = false;
      db.close(); // ends the transaction and drops the record lock
    },
  };
}

/** Whether a control plane holds the database now (for commands that must not run beside one, such as a restore). */
export function databaseInUse(databaseFile: string): boolean {
  try {
    lockDatabase(databaseFile).release();
    return false;
  } catch (error) {
    if (error instanceof DatabaseInUseError) return true;
    throw error;
  }
}
