import path from "node:path";
import fs from "node:fs";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import postgres from "postgres";
import { sql } from "drizzle-orm";
import { drizzle as drizzleSqlite } from "drizzle-orm/better-sqlite3";
import { migrate as migrateSqlite } from "drizzle-orm/better-sqlite3/migrator";
import { drizzle as drizzlePg, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import { migrate as migratePg } from "drizzle-orm/postgres-js/migrator";
import * as pgSchema from "./schema/pg";
import * as sqliteSchema from "./schema/sqlite";

export type Dialect = "sqlite" | "pg";

/**
 * The repositories are written once, against the PostgreSQL flavour of drizzle's
 * types. The SQLite handle is the same query builder over tables with the same
 * column names, so at run time each dialect builds its own SQL; only the static
 * types are shared. Anything dialect-specific stays in this file.
 */
export type Tables = typeof pgSchema;
export type Db = PostgresJsDatabase<Record<string, never>>;

export interface DbHandle {
  readonly dialect: Dialect;
  readonly t: Tables;
  /** Runs fn with the database; on SQLite, never inside another caller's open transaction. */
  run<T>(fn: (db: Db) => Promise<T>): Promise<T>;
  /** Runs fn in one database transaction: all or nothing. */
  transaction<T>(fn: (db: Db) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

const migrationsDir = (dialect: Dialect) =>
  path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "migrations", dialect);

/** `file:./data/x.db`, `file::memory:` or a bare path select SQLite; `postgres://` selects PostgreSQL. */
export async function createDb(url: string): Promise<DbHandle> {
  if (/^postgres(ql)?:\/\//.test(url)) return openPg(url);
  return openSqlite(url);
}

function openSqlite(url: string): DbHandle {
  const file = url.replace(/^file:/, "");
  const memory = file === ":memory:" || file === "";
  if (!memory) fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const sqlite = new Database(memory ? ":memory:" : file);
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("synchronous = NORMAL");
  sqlite.pragma("busy_timeout = 5000");
  const db = drizzleSqlite(sqlite);
  migrateSqlite(db, { migrationsFolder: migrationsDir("sqlite") });

  // better-sqlite3 is synchronous and drizzle's SQLite transactions cannot await.
  // Our repository code awaits between statements, so another request's
  // statements could slip into an open transaction. One queue for every caller
  // closes that gap; on one connection SQLite serialises writes anyway.
  let tail: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const next = tail.then(fn, fn);
    tail = next.catch(() => undefined);
    return next;
  };
  const asPg = db as unknown as Db;
  return {
    dialect: "sqlite",
    t: sqliteSchema as unknown as Tables,
    run: (fn) => serial(() => fn(asPg)),
    transaction: (fn) =>
      serial(async () => {
        sqlite.exec("BEGIN IMMEDIATE");
        try {
          const out = await fn(asPg);
          sqlite.exec("COMMIT");
          return out;
        } catch (err) {
          if (sqlite.inTransaction) sqlite.exec("ROLLBACK");
          throw err;
        }
      }),
    close: async () => {
      await tail;
      sqlite.close();
    },
  };
}

async function openPg(url: string): Promise<DbHandle> {
  // A one-connection client for migrating, so the advisory lock and the DDL share
  // a session: several replicas may start at once, and only one migrates.
  const migrator = postgres(url, { max: 1, onnotice: () => undefined });
  try {
    await migrator`select pg_advisory_lock(727274)`;
    await migratePg(drizzlePg(migrator), { migrationsFolder: migrationsDir("pg") });
    await migrator`select pg_advisory_unlock(727274)`;
  } finally {
    await migrator.end({ timeout: 5 });
  }
  const client = postgres(url, { max: 10, onnotice: () => undefined });
  const db = drizzlePg(client) as unknown as Db;
  return {
    dialect: "pg",
    t: pgSchema,
    run: (fn) => fn(db),
    transaction: (fn) => db.transaction((tx) => fn(tx as unknown as Db)),
    close: () => client.end({ timeout: 5 }),
  };
}

/** Case-insensitive substring match that both dialects understand. */
export const containsIgnoreCase = (column: unknown, needle: string) =>
  sql`lower(${column}) like ${"%" + needle.toLowerCase().replace(/[\\%_]/g, (c) => "\\" + c) + "%"} escape '\\'`;
