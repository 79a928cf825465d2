// A database a newer release migrated (the control plane rolled back after an upgrade):
// this build refuses it at open, saying why, instead of starting and failing at the
// first write to a column the newer release dropped. Nothing in it is touched.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describeEachDatabase } from "@cm/testkit";
import Database from "better-sqlite3";
import postgres from "postgres";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createDb, DatabaseNewerError } from "../src";

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

  it("refuses to open it, naming both migrations' times, and leaves it as it was", async () => {
    const dialect = db.name === "sqlite" ? "sqlite" : "pg";
    const table = dialect === "sqlite" ? "__drizzle_migrations" : "drizzle.__drizzle_migrations";
    const newer = newestKnown(dialect) + 86_400_000;
    await sql(`insert into ${table} (hash, created_at) values ('from-a-newer-release', ${newer})`);
    await sql("insert into settings (key, value) values ('kept', 'yes')");
    const opened = createDb(url);
    await expect(opened).rejects.toBeInstanceOf(DatabaseNewerError);
    await expect(opened).rejects.toThrow(
      `the database was migrated by a newer release (its last migration is of ${new Date(newer).toISOString()}, this release knows them up to ${new Date(newestKnown(dialect)).toISOString()})`,
    );
    expect(await sql(`select count(*) as n from ${table} where hash = 'from-a-newer-release'`)).toEqual([{ n: dialect === "sqlite" ? 1 : "1" }]);
    expect(await sql("select value from settings where key = 'kept'")).toEqual([{ value: "yes" }]);
    // Once the newer release's migration is gone again (its backup restored), it opens.
    await sql(`delete from ${table} where hash = 'from-a-newer-release'`);
    await (await createDb(url)).close();
  });
});
