import fs from "node:fs";
import path from "node:path";
import { backupDatabase, besideDatabase, type DatabaseFileFacts, DatabaseInUseError, NotOurDatabaseError, restoreDatabase } from "@cm/db/sqlite-files";
import { loadConfig } from "./config";
import { describeDatabase, sqliteFile } from "./database-location";

/**
 * `cm-admin backup [FILE]` and `cm-admin restore FILE` (issue 40): the embedded
 * database by SQLite's online backup, beside a running control plane; PostgreSQL's
 * by its own tools, whose command lines are printed rather than run (a server's
 * pg_dump must match its version, and the password stays out of argv and out of this
 * program's output).
 */
export async function backup(args: string[]) {
  if (args.length > 1) throw new Error("usage: cm-admin backup [FILE]");
  const url = loadConfig().DATABASE_URL;
  const file = sqliteFile(url);
  if (!file) {
    if (!/^postgres(ql)?:\/\//.test(url)) throw new Error(`DATABASE_URL=${url} is not a database a backup can be taken of`);
    const dump = args[0] ?? `cm-${stamp(Date.now())}.dump`;
    const pg = pgParts(url);
    process.stderr.write(
      `${describeDatabase(url)} is PostgreSQL: cm-admin writes nothing. Back it up with pg_dump (the server's major version or newer), ` +
        `which asks for ${pg.user}'s password (or reads PGPASSWORD or ~/.pgpass), running the control plane or not:\n`,
    );
    console.log(`pg_dump ${pg.args.join(" ")} --format=custom --file=${sh(dump)}`);
    process.stderr.write(`Restore it, with the control plane stopped: pg_restore ${pg.args.join(" ")} --clean --if-exists ${sh(dump)}\n`);
    return;
  }
  if (!fs.existsSync(file)) throw new Error(`no database at ${file} (${describeDatabase(url)}); nothing was backed up`);
  const dest = args[0] ? path.resolve(args[0]) : besideDatabase(file, "backup", Date.now());
  const facts = await backupDatabase(file, dest);
  console.log(
    `backed up ${file} to ${dest} (${size(facts.bytes)}, ${migrated(facts)}); restore it with the control plane stopped: cm-admin restore ${sh(dest)}`,
  );
}

export async function restore(args: string[]) {
  if (args.length !== 1) throw new Error("usage: cm-admin restore FILE   (with the control plane stopped)");
  const url = loadConfig().DATABASE_URL;
  const file = sqliteFile(url);
  if (!file)
    throw new Error(
      `${describeDatabase(url)} is not an embedded database: restore a PostgreSQL dump with pg_restore (cm-admin backup prints the line); nothing was changed`,
    );
  const from = path.resolve(args[0]!);
  try {
    const { restored, aside } = await restoreDatabase(file, from, Date.now());
    console.log(
      `restored ${from} into ${file} (${migrated(restored)}); ${aside ? `the database it replaced is kept at ${aside}` : "there was no database there before"}`,
    );
    if (restored.newerThanThisRelease)
      console.log("it was migrated by a newer release than this one, whose control plane refuses it: start that release on it");
    console.log("start the control plane again (systemctl start cm-control-plane, or as you run it)");
  } catch (error) {
    if (error instanceof NotOurDatabaseError) throw new Error(`${error.message}; nothing was restored`);
    if (error instanceof DatabaseInUseError) throw new Error(error.message);
    throw error;
  }
}

const migrated = (f: DatabaseFileFacts) =>
  `${f.migrations} migrations, the last of ${f.lastMigrationMs === null ? "none" : new Date(f.lastMigrationMs).toISOString()}`;

const size = (bytes: number) => (bytes >= 1e6 ? `${(bytes / 1e6).toFixed(1)} MB` : `${Math.max(1, Math.round(bytes / 1e3))} kB`);

const stamp = (ms: number) =>
  new Date(ms)
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d+Z$/, "Z");

/** A word as the shell reads it literally. */
const sh = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`);

/** pg_dump's connection options for a URL: its parts, never its password; query settings (sslmode...) as a conninfo. */
function pgParts(url: string): { user: string; args: string[] } {
  const u = new URL(url);
  const user = decodeURIComponent(u.username) || "postgres";
  const database = decodeURIComponent(u.pathname.replace(/^\//, "")) || user;
  const args = [`--host=${sh(u.hostname.replace(/^\[(.*)\]$/, "$1") || "localhost")}`, `--port=${u.port || "5432"}`, `--username=${sh(user)}`];
  // A conninfo value with a space, a quote or a backslash is quoted and escaped (libpq's rules).
  const value = (v: string) => (/[\s'\\]/.test(v) || v === "" ? `'${v.replace(/[\\']/g, "\\$&")}'` : v);
  const settings = [...u.searchParams].map(([k, v]) => `${k}=${value(v)}`);
  args.push(settings.length ? `--dbname=${sh([`dbname=${value(database)}`, ...settings].join(" "))}` : `--dbname=${sh(database)}`);
  return { user, args };
}
