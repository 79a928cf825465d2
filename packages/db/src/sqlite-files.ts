// The embedded database as files: a backup of a running one, and a restore into a
// stopped one. It runs in WAL mode, so the file alone is not the database (the
// latest commits may sit in its -wal beside it) and a copy of a running one may be
// torn: a backup goes through SQLite's online backup, which reads a consistent
// snapshot however many writers there are.
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { migrationsDir } from "./client";
import { DatabaseInUseError, lockDatabase, lockFileFor } from "./process-lock";
import { DatabaseNewerError, judgeDatabase, RUNNABLE_FROM_KEY } from "./releases";

export { DatabaseInUseError };

/** What `file` is as a database of ours: how far it was migrated, and whether this build knows that far. */
export type DatabaseFileFacts = {
  file: string;
  bytes: number;
  migrations: number;
  /** When its last migration was written (drizzle's created_at), or null where none ran. */
  lastMigrationMs: number | null;
  /** Migrated by a release more than one ahead of this one, which refuses to start on it (one release ahead it runs: releases.ts). */
  newerThanThisRelease: boolean;
};

/** A file that is not one of our databases, or unreadable, and why. */
export class NotOurDatabaseError extends Error {}

type Journal = { entries: { when: number; tag: string }[] };
const journal = (): Journal => JSON.parse(fs.readFileSync(path.join(migrationsDir("sqlite"), "meta/_journal.json"), "utf8"));

/**
 * Reads `file` without changing it: one of ours has drizzle's migrations table whose
 * first row is our first migration (by its hash, as drizzle computes it).
 */
export function inspectDatabaseFile(file: string): DatabaseFileFacts {
  if (!fs.existsSync(file)) throw new NotOurDatabaseError(`${file} does not exist`);
  let db: Database.Database;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch (error) {
    throw new NotOurDatabaseError(`${file} cannot be opened as a SQLite database: ${(error as Error).message}`);
  }
  try {
    const table = db.prepare("select 1 from sqlite_master where type = 'table' and name = '__drizzle_migrations'").get();
    if (!table) throw new NotOurDatabaseError(`${file} is a SQLite database but not one of the control plane's: it has no migrations table`);
    const rows = db.prepare("select hash, created_at as createdAt from __drizzle_migrations order by id").all() as { hash: string; createdAt: number }[];
    const entries = journal().entries;
    const first =
      entries[0] &&
      createHash("sha256")
        .update(fs.readFileSync(path.join(migrationsDir("sqlite"), `${entries[0].tag}.sql`)))
        .digest("hex");
    if (rows.length === 0 || rows[0]!.hash !== first)
      throw new NotOurDatabaseError(`${file} has a migrations table, but its first migration is not the control plane's: it is another program's database`);
    const lastMigrationMs = Math.max(...rows.map((r) => Number(r.createdAt)));
    const word = (db.prepare("select value from settings where key = ?").get(RUNNABLE_FROM_KEY) as { value: string } | undefined)?.value ?? null;
    let refused = false;
    try {
      judgeDatabase("sqlite", lastMigrationMs, word);
    } catch (error) {
      if (!(error instanceof DatabaseNewerError)) throw error;
      refused = true;
    }
    return {
      file,
      bytes: fs.statSync(file).size,
      migrations: rows.length,
      lastMigrationMs,
      newerThanThisRelease: refused,
    };
  } catch (error) {
    if (error instanceof NotOurDatabaseError) throw error;
    throw new NotOurDatabaseError(`${file} cannot be read as a SQLite database: ${(error as Error).message}`);
  } finally {
    db.close();
  }
}

/** `dir/marketplace-<label>-20260102T030405Z.db` for `dir/marketplace.db`, never a file that exists. */
export function besideDatabase(databaseFile: string, label: string, nowMs: number): string {
  const ext = path.extname(databaseFile);
  const stem = path.join(path.dirname(databaseFile), path.basename(databaseFile, ext));
  const stamp = new Date(nowMs)
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d+Z$/, "Z");
  for (let n = 1; ; n++) {
    const candidate = `${stem}-${label}-${stamp}${n > 1 ? `-${n}` : ""}${ext || ".db"}`;
    if (!fs.existsSync(candidate)) return candidate;
  }
}

/**
 * A consistent copy of the database at `source` (running or not) at `dest`, which
 * must not exist. Written aside and renamed into place, so `dest` is never half a
 * backup; readable by its owner alone (it holds every account); in rollback-journal
 * mode, so that reading it later leaves no -wal or -shm beside it.
 */
export async function backupDatabase(source: string, dest: string): Promise<DatabaseFileFacts> {
  if (fs.existsSync(dest)) throw new Error(`${dest} exists; a backup never replaces a file`);
  // Not read-only: a read-only connection leaves -wal and -shm behind when it is the last
  // one, owned by whoever ran this (root, from the installer), which the service's user then
  // cannot open. As the last connection this one removes them; beside a running control
  // plane they are its own and stay.
  const db = new Database(source, { fileMustExist: true, timeout: 5000 });
  const partial = `${dest}.partial-${process.pid}`;
  try {
    // Every page in one step, in one read transaction: a step of a few pages at a time
    // starts over whenever another connection writes between two steps, which under
    // load may be always.
    await db.backup(partial, { progress: () => 0x7fffffff });
    const copy = new Database(partial);
    try {
      copy.pragma("journal_mode = DELETE");
      const check = copy.pragma("quick_check", { simple: true });
      if (check !== "ok") throw new Error(`the copy fails SQLite's quick_check: ${String(check)}`);
    } finally {
      copy.close();
    }
    fs.chmodSync(partial, 0o600);
    fsyncFile(partial);
    fs.renameSync(partial, dest);
    fsyncFile(path.dirname(dest));
  } finally {
    fs.rmSync(partial, { force: true });
    db.close();
  }
  return inspectDatabaseFile(dest);
}

/**
 * Replaces the embedded database at `databaseFile` with the backup `backupFile`,
 * with no control plane running on it (its lock, process-lock.ts, is taken for the
 * while, so none starts meanwhile). The database replaced is kept, whole, at the
 * file answered. Throws DatabaseInUseError while a control plane runs on it.
 */
export async function restoreDatabase(databaseFile: string, backupFile: string, nowMs: number): Promise<{ restored: DatabaseFileFacts; aside?: string }> {
  const restored = inspectDatabaseFile(backupFile);
  let lock: ReturnType<typeof lockDatabase>;
  try {
    lock = lockDatabase(databaseFile);
  } catch (error) {
    if (!(error instanceof DatabaseInUseError)) throw error;
    throw new DatabaseInUseError(
      `a control plane is running on ${databaseFile} (it holds ${lockFileFor(databaseFile)}): stop it (systemctl stop cm-control-plane), then restore; nothing was changed`,
    );
  }
  try {
    const incoming = `${databaseFile}.restoring-${process.pid}`;
    const src = new Database(backupFile, { readonly: true, fileMustExist: true });
    try {
      await src.backup(incoming, { progress: () => 0x7fffffff });
    } finally {
      src.close();
    }
    let aside: string | undefined;
    try {
      if (fs.existsSync(databaseFile)) {
        const existing = fs.statSync(databaseFile);
        // The restored file as the one it replaces: the service's user must open it (a restore runs as root).
        fs.chmodSync(incoming, existing.mode & 0o777);
        if (process.getuid?.() === 0) fs.chownSync(incoming, existing.uid, existing.gid);
        aside = besideDatabase(databaseFile, "replaced", nowMs);
        setAside(databaseFile, aside);
      }
      fsyncFile(incoming);
      fs.renameSync(incoming, databaseFile);
      // The lock file, made just now by root where none was: the service's, or it cannot lock.
      const owner = fs.statSync(path.dirname(databaseFile));
      if (process.getuid?.() === 0 && fs.statSync(lockFileFor(databaseFile)).uid === 0) fs.chownSync(lockFileFor(databaseFile), owner.uid, owner.gid);
      fsyncFile(path.dirname(databaseFile));
    } finally {
      fs.rmSync(incoming, { force: true });
    }
    return { restored: { ...restored, file: databaseFile }, ...(aside ? { aside } : {}) };
  } finally {
    lock.release();
  }
}

/**
 * Moves the database to `aside` as one self-contained file: its WAL folded in and
 * removed (leaving a -wal behind would let SQLite apply it to the restored file).
 * Leaving WAL mode needs every other connection closed, so a program still holding
 * the file (a cm-admin command, a control plane that does not take the lock) stops it here.
 */
function setAside(databaseFile: string, aside: string) {
  const db = new Database(databaseFile, { fileMustExist: true, timeout: 0 });
  try {
    db.pragma("wal_checkpoint(TRUNCATE)");
    db.pragma("journal_mode = DELETE");
  } catch (error) {
    if ((error as { code?: string }).code?.startsWith("SQLITE_BUSY"))
      throw new DatabaseInUseError(`another program has ${databaseFile} open (a cm-admin command, or a control plane): stop it; nothing was changed`);
    throw error;
  } finally {
    db.close();
  }
  if (fs.existsSync(`${databaseFile}-wal`)) throw new Error(`${databaseFile}-wal is still there after leaving WAL mode; nothing was changed`);
  fs.rmSync(`${databaseFile}-shm`, { force: true });
  fs.renameSync(databaseFile, aside);
}

function fsyncFile(file: string) {
  const fd = fs.openSync(file, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
