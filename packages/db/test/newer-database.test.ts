// A database a newer release migrated. Exactly one release ahead (a rolling upgrade
// under way, or a rollback by one release) this build runs on it as it is, since
// migrations are expand-then-contract (releases.ts); further ahead it refuses it at
// open, saying why, instead of starting and failing at the first write to a column
// a newer release dropped. Nothing in it is touched either way.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describeEachDatabase } from "@cm/testkit";
import Database from "better-sqlite3";
import postgres from "postgres";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createDb, DatabaseNewerError } from "../src";
import { RUNNABLE_FROM_KEY, type RunnableFrom, thisBuild } from "../src/releases";

const migrations = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../migrations");
const newestKnown = (dialect: string) =>
  Math.max(...(JSON.parse(readFileSync(path.join(migrations, dialect, "meta/_journal.json"), "utf8")).entries as { when: number }[]).map((e) => e.when));

describeEachDatabase("a database migrated by a newer release, on $name", (db) => {
  let url = "";
  let drop: () => Promise<void> = async () => undefined;
  const scratch = mkdtempSync(path.join(tmpdir(), "cm-newer-db-"));
  /** Runs SQL on the database itself, as the newer release left it. */
  let sql: (text: string) => Promise<unknown[]>;

  beforeAll(async () => {
    const made = await db.create();
    // The embedded test database is in memory: a file here, so a second open sees the first one's work.
    url = db.name === "sqlite" ? `file:${path.join(scratch, "marketplace.db")}` : made.url;
    drop = made.drop;
    await (await createDb(url)).close();
    if (db.name === "sqlite") {
      const file = url.slice("file:".length);
      sql = async (text) => {
        const conn = new Database(file);
        try {
          if (text.trim().startsWith("select")) return conn.prepare(text).all();
          conn.exec(text);
          return [];
        } finally {
          conn.close();
        }
      };
    } else {
      sql = async (text) => {
        const conn = postgres(url, { max: 1, onnotice: () => undefined });
        try {
          return [...(await conn.unsafe(text))];
        } finally {
          await conn.end();
        }
      };
    }
  });
  afterAll(async () => {
    await drop();
    rmSync(scratch, { recursive: true, force: true });
  });

  const dialectOf = () => (db.name === "sqlite" ? "sqlite" : "pg");
  const table = () => (dialectOf() === "sqlite" ? "__drizzle_migrations" : "drizzle.__drizzle_migrations");
  const word = async () => ((await sql(`select value from settings where key = '${RUNNABLE_FROM_KEY}'`)) as { value: string }[])[0]?.value;
  /** What a newer release leaves: its migration's row, and its word on who may still run the database. */
  const migrateAsNewer = async (newerMs: number, runnableFrom: RunnableFrom | null) => {
    await sql(`insert into ${table()} (hash, created_at) values ('from-a-newer-release', ${newerMs})`);
    if (runnableFrom) await sql(`update settings set value = '${JSON.stringify(runnableFrom)}' where key = '${RUNNABLE_FROM_KEY}'`);
    else await sql(`delete from settings where key = '${RUNNABLE_FROM_KEY}'`);
  };
  const undo = async () => {
    await sql(`delete from ${table()} where hash = 'from-a-newer-release'`);
    await (await createDb(url)).close();
  };

  it("records, when it migrates, which releases may still run on it: the one before this build's migrations", async () => {
    const build = thisBuild(dialectOf());
    expect(JSON.parse((await word())!)).toEqual(build.runnableFrom);
    expect(build.runnableFrom.migrationMs).toBeLessThanOrEqual(newestKnown(dialectOf()));
  });

  it("runs on one exactly a release ahead (a rolling upgrade), migrating nothing and saying so", async () => {
    const newer = newestKnown(dialectOf()) + 86_400_000;
    const from: RunnableFrom = { release: "this-one", migrationMs: newestKnown(dialectOf()), migratedBy: "9.9.9", migratedToMs: newer };
    await migrateAsNewer(newer, from);
    const handle = await createDb(url);
    try {
      expect(handle.newerRelease).toContain(`the database was migrated by a newer release, 9.9.9 (its last migration is of ${new Date(newer).toISOString()}`);
      expect(handle.newerRelease).toContain("runs on it and migrates nothing, as during a rolling upgrade");
    } finally {
      await handle.close();
    }
    // The newer release's word stays: this older build neither migrates nor speaks for the database.
    expect(JSON.parse((await word())!)).toEqual(from);
    expect(await sql(`select count(*) as n from ${table()} where hash = 'from-a-newer-release'`)).toEqual([{ n: dialectOf() === "sqlite" ? 1 : "1" }]);
    await undo();
    expect(JSON.parse((await word())!)).toEqual(thisBuild(dialectOf()).runnableFrom);
  });

  it("refuses one more than a release ahead, naming both migrations' times, and leaves it as it was", async () => {
    const dialect = dialectOf();
    const newer = newestKnown(dialect) + 86_400_000;
    // The newer release runs builds that know a migration this one does not: two releases on.
    const from: RunnableFrom = { release: "9.8.0", migrationMs: newestKnown(dialect) + 3_600_000, migratedBy: "9.9.0", migratedToMs: newer };
    await migrateAsNewer(newer, from);
    await sql("insert into settings (key, value) values ('kept', 'yes')");
    const opened = createDb(url);
    await expect(opened).rejects.toBeInstanceOf(DatabaseNewerError);
    await expect(opened).rejects.toThrow(
      `the database was migrated by a newer release (its last migration is of ${new Date(newer).toISOString()}, this release knows them up to ${new Date(newestKnown(dialect)).toISOString()}), more than one release ahead of this one`,
    );
    await expect(opened).rejects.toThrow(": it runs 9.8.0 and newer: run that release again, or restore the database from the backup taken before the upgrade");
    expect(await sql(`select count(*) as n from ${table()} where hash = 'from-a-newer-release'`)).toEqual([{ n: dialect === "sqlite" ? 1 : "1" }]);
    expect(await sql("select value from settings where key = 'kept'")).toEqual([{ value: "yes" }]);
    expect(JSON.parse((await word())!)).toEqual(from);
    // Once the newer release's migration is gone again (its backup restored), it opens.
    await undo();
  });

  it("refuses one a newer release migrated without saying who may run it (a release from before this rule)", async () => {
    await migrateAsNewer(newestKnown(dialectOf()) + 86_400_000, null);
    await expect(createDb(url)).rejects.toThrow(/more than one release ahead of this one \([^)]+\): run that release again/);
    await undo();
  });

  it("refuses one whose word on who may run it is older than its last migration (left before that migration ran)", async () => {
    const newer = newestKnown(dialectOf()) + 86_400_000;
    await migrateAsNewer(newer, { release: "this-one", migrationMs: newestKnown(dialectOf()), migratedBy: "9.9.9", migratedToMs: newer - 1 });
    await expect(createDb(url)).rejects.toThrow(/more than one release ahead of this one \([^)]+\): run that release again/);
    await undo();
  });
});
