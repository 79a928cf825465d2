import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { KeyedQueue } from "@cm/protocol";
import Database from "better-sqlite3";
import { sql } from "drizzle-orm";
import { drizzle as drizzleSqlite } from "drizzle-orm/better-sqlite3";
import { migrate as migrateSqlite } from "drizzle-orm/better-sqlite3/migrator";
import { drizzle as drizzlePg, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import { migrate as migratePg } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import { PG_POOL_MAX } from "./pool-use";
import { DatabaseNewerError, judgeDatabase, RUNNABLE_FROM_KEY, thisBuild } from "./releases";
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
  /**
   * Set where a newer release migrated the database, exactly one release ahead of this
   * one (a rolling upgrade under way): why this build runs on it without migrating.
   */
  readonly newerRelease?: string;
  /** Resolves once the database answers a trivial query; rejects if it does not within timeoutMs. */
  ping(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

/** Where this build's migrations are: packages/db/migrations in a checkout, migrations/ beside lib/ in a release. */
export const migrationsDir = (dialect: Dialect) => path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "migrations", dialect);

export { DatabaseNewerError };

/** The word a migrating build leaves for older ones (releases.ts), as the settings row's SQL. */
const runnableFromRow = (dialect: Dialect) => JSON.stringify(thisBuild(dialect).runnableFrom);

/** `file:./data/x.db`, `file::memory:` or a bare path select SQLite; `postgres://` selects PostgreSQL. */
/**
 * Opens and migrates the database. One exactly a release ahead of this build is opened
 * as it is (the handle's newerRelease says so); DatabaseNewerError when further ahead.
 */
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
  let newerRelease: string | null;
  try {
    const migrated = sqlite.prepare("select 1 from sqlite_master where type = 'table' and name = '__drizzle_migrations'").get();
    const last = migrated ? (sqlite.prepare("select max(created_at) as last from __drizzle_migrations").get() as { last: number | null }).last : null;
    const word = migrated
      ? ((sqlite.prepare("select value from settings where key = ?").get(RUNNABLE_FROM_KEY) as { value: string } | undefined)?.value ?? null)
      : null;
    newerRelease = judgeDatabase("sqlite", last === null ? null : Number(last), word);
    if (!newerRelease) {
      migrateSqlite(db, { migrationsFolder: migrationsDir("sqlite") });
      sqlite
        .prepare("insert into settings (key, value) values (?, ?) on conflict (key) do update set value = excluded.value")
        .run(RUNNABLE_FROM_KEY, runnableFromRow("sqlite"));
    }
  } catch (error) {
    sqlite.close();
    throw error;
  }

  // better-sqlite3 is synchronous and drizzle's SQLite transactions cannot await.
  // Our repository code awaits between statements, so another request's
  // statements could slip into an open transaction. One queue for every caller
  // closes that gap; on one connection SQLite serialises writes anyway.
  const queue = new KeyedQueue();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => queue.run("sqlite", fn);
  const asPg = db as unknown as Db;
  return {
    dialect: "sqlite",
    t: sqliteSchema as unknown as Tables,
    ...(newerRelease ? { newerRelease } : {}),
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
    // An embedded file answers whenever this process runs.
    ping: async () => undefined,
    close: async () => {
      await queue.idle();
      sqlite.close();
    },
  };
}

async function openPg(url: string): Promise<DbHandle> {
  // A one-connection client for migrating, so the advisory lock and the DDL share
  // a session: several replicas may start at once, and only one migrates.
  const migrator = postgres(url, { max: 1, onnotice: () => undefined });
  let newerRelease: string | null;
  try {
    await migrator`select pg_advisory_lock(727274)`;
    const [applied] = await migrator`select to_regclass('drizzle.__drizzle_migrations') is not null as migrated`;
    const last = applied?.migrated ? (await migrator`select max(created_at)::text as last from drizzle.__drizzle_migrations`)[0]?.last : null;
    const word = applied?.migrated ? ((await migrator`select value from settings where key = ${RUNNABLE_FROM_KEY}`)[0]?.value ?? null) : null;
    newerRelease = judgeDatabase("pg", last == null ? null : Number(last), word);
    if (!newerRelease) {
      await migratePg(drizzlePg(migrator), { migrationsFolder: migrationsDir("pg") });
      await migrator`insert into settings (key, value) values (${RUNNABLE_FROM_KEY}, ${runnableFromRow("pg")}) on conflict (key) do update set value = excluded.value`;
    }
    await migrator`select pg_advisory_unlock(727274)`;
  } finally {
    await migrator.end({ timeout: 5 });
  }
  // postgres.js waits longer before each reconnect after failures (up to 20 s),
  // so queries kept hanging well after a database outage ended: retry at a
  // steady pace instead, and fail each query of an outage at once.
  const client = postgres(url, { max: PG_POOL_MAX, onnotice: () => undefined, backoff: () => PG_RECONNECT_BACKOFF_S, connect_timeout: 10 });
  const db = drizzlePg(client) as unknown as Db;
  return {
    dialect: "pg",
    t: pgSchema,
    ...(newerRelease ? { newerRelease } : {}),
    run: (fn) => fn(db),
    transaction: (fn) => db.transaction((tx) => fn(tx as unknown as Db)),
    ping: (timeoutMs) => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(Object.assign(new Error(`the database did not answer within ${timeoutMs} ms`), { code: "CONNECT_TIMEOUT" })),
          timeoutMs,
        );
      });
      return Promise.race([client`select 1`.then(() => undefined), late]).finally(() => clearTimeout(timer));
    },
    close: () => client.end({ timeout: 5 }),
  };
}

const PG_RECONNECT_BACKOFF_S = 0.25;

// Errors that say the database cannot be reached or is not accepting work right
// now (as opposed to a query it refused): postgres.js's connection codes, the
// socket's, and SQLSTATE class 08 (connection exception), 57P01-57P03 (shut
// down, crashed, starting up) and 53300 (too many connections).
const UNAVAILABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EPIPE",
  "EAI_AGAIN",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "57P01",
  "57P02",
  "57P03",
  "53300",
]);

/** Whether err (or what it wraps) means the database is unreachable, not that it refused the query. */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (let e = err, depth = 0; e && typeof e === "object" && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && (UNAVAILABLE_CODES.has(code) || code.startsWith("08"))) return true;
  }
  return false;
}

/** Case-insensitive substring match that both dialects understand. */
export const containsIgnoreCase = (column: unknown, needle: string) =>
  sql`lower(${column}) like ${"%" + needle.toLowerCase().replace(/[\\%_]/g, (c) => "\\" + c) + "%"} escape '\\'`;
