// Releases, as far as the database is concerned: which migrations each one ships
// (migrations/releases.json), so that a database one release ahead of a build is
// still run by it while a rolling upgrade replaces the replicas one at a time,
// and one further ahead is refused. The migrating build leaves its word in the
// database (a settings row, RUNNABLE_FROM_KEY): the oldest migration a build must
// know to run on it, the last one of the release before. An older build cannot know
// the newer one's releases, so the word is the newer build's to give.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

type Dialect = "sqlite" | "pg";

export type Release = { version: string; lastMigration: string };
export type JournalEntry = { idx: number; when: number; tag: string };

const MIGRATIONS_ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "migrations");

export const readReleases = (root = MIGRATIONS_ROOT): Release[] =>
  (JSON.parse(fs.readFileSync(path.join(root, "releases.json"), "utf8")) as { releases: Release[] }).releases;

export const readJournal = (dialect: Dialect, root = MIGRATIONS_ROOT): JournalEntry[] =>
  (JSON.parse(fs.readFileSync(path.join(root, dialect, "meta/_journal.json"), "utf8")) as { entries: JournalEntry[] }).entries;

/**
 * The database was migrated by a release more than one ahead of this one (a rollback
 * past the release before, or a replica left behind two upgrades): this build's
 * statements may name columns that are gone, so it must not start on it.
 */
export class DatabaseNewerError extends Error {}

/** The settings row a migrating build writes: which builds may run on the database it leaves. */
export const RUNNABLE_FROM_KEY = "schema.runnable_from";
export type RunnableFrom = {
  /** The release before the migrating one, whose builds (and newer) may run on it. */
  release: string;
  /** That release's last migration (its journal time, drizzle's created_at): a build must know it. */
  migrationMs: number;
  /** Which release migrated it. */
  migratedBy: string;
  /** The last migration it applied: the word is about the database so migrated, and stale once another one ran. */
  migratedToMs: number;
};

/** What this build is: its newest migration, its release's name, and the word it leaves in a database it migrates. */
export function thisBuild(dialect: Dialect, releases = readReleases(), journal = readJournal(dialect)) {
  const newest = journal.reduce((a, b) => (b.idx > a.idx ? b : a));
  const idx = (tag: string) => {
    const e = journal.find((j) => j.tag === tag);
    if (!e) throw new Error(`releases.json names migration ${tag}, which this build's ${dialect} journal does not have`);
    return e;
  };
  const own = [...releases].reverse().find((r) => r.lastMigration === newest.tag);
  const last = releases.at(-1);
  const label = own ? own.version : last ? `the release after ${last.version}` : "unreleased";
  const before = [...releases].reverse().find((r) => idx(r.lastMigration).idx < newest.idx);
  const runnableFrom: RunnableFrom = before
    ? { release: before.version, migrationMs: idx(before.lastMigration).when, migratedBy: label, migratedToMs: newest.when }
    : { release: label, migrationMs: newest.when, migratedBy: label, migratedToMs: newest.when };
  return { newest, label, runnableFrom };
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * Judges a database whose last applied migration is `lastAppliedMs`, given the word
 * its migrating build left (the settings row's value, or null). Returns null where
 * this build migrates it as usual; a warning where it is exactly one release ahead
 * (run on it, migrate nothing); throws DatabaseNewerError where further ahead.
 */
export function judgeDatabase(dialect: Dialect, lastAppliedMs: number | null, word: string | null, build = thisBuild(dialect)): string | null {
  const knownMs = build.newest.when;
  if (lastAppliedMs === null || lastAppliedMs <= knownMs) return null;
  let from: RunnableFrom | null = null;
  try {
    from = word ? (JSON.parse(word) as RunnableFrom) : null;
  } catch {
    from = null;
  }
  if (from && from.migratedToMs !== lastAppliedMs) from = null;
  const facts = `its last migration is of ${iso(lastAppliedMs)}, this release knows them up to ${iso(knownMs)}`;
  // A word left before the newest migration ran (by a build that did not leave its own) says nothing of it.
  if (from && from.migratedToMs === lastAppliedMs && typeof from.migrationMs === "number" && knownMs >= from.migrationMs)
    return (
      `the database was migrated by a newer release, ${from.migratedBy} (${facts}), which the release before it may still run: ` +
      `this one (${build.label}) runs on it and migrates nothing, as during a rolling upgrade; upgrade this replica too`
    );
  throw new DatabaseNewerError(
    `the database was migrated by a newer release (${facts}), more than one release ahead of this one (${build.label})` +
      `${from ? `: it runs ${from.release} and newer` : ""}: run that release again, ` +
      "or restore the database from the backup taken before the upgrade",
  );
}

// ---- The rule that keeps the release before running: expand, then contract ----

type Column = { notNull: boolean; hasDefault: boolean; primaryKey: boolean };
type Schema = Map<string, Map<string, Column>>;

/** A drizzle-kit snapshot (either dialect) as tables and their columns. */
export function snapshotSchema(snapshot: unknown): Schema {
  const tables = (snapshot as { tables: Record<string, { name: string; columns: Record<string, Record<string, unknown>> }> }).tables;
  return new Map(
    Object.values(tables).map((t) => [
      t.name,
      new Map(
        Object.values(t.columns).map((c) => [
          c.name as string,
          { notNull: c.notNull === true, hasDefault: c.default !== undefined, primaryKey: c.primaryKey === true },
        ]),
      ),
    ]),
  );
}

const Q = '[`"]?';
const NAME = `${Q}(\\w+)${Q}`;
const TABLE = `(?:${Q}\\w+${Q}\\.)?${NAME}`;

/** What a migration's SQL drops or renames away: tables, and table.column. */
export function removedBySql(text: string): { tables: string[]; columns: string[] } {
  const rebuilt = new Set<string>();
  const tables: string[] = [];
  const columns: string[] = [];
  for (const m of text.matchAll(new RegExp(`ALTER TABLE\\s+${TABLE}\\s+RENAME TO\\s+${NAME}`, "gi"))) {
    // SQLite changes a column by copying the table into __new_<t> and renaming that back: a
    // rebuild, whose lost columns the snapshots' comparison finds.
    if (m[1]!.startsWith("__new_")) rebuilt.add(m[2]!);
    else tables.push(m[1]!);
  }
  for (const m of text.matchAll(new RegExp(`DROP TABLE\\s+(?:IF EXISTS\\s+)?${TABLE}`, "gi"))) if (!rebuilt.has(m[1]!)) tables.push(m[1]!);
  for (const m of text.matchAll(new RegExp(`ALTER TABLE\\s+${TABLE}\\s+DROP COLUMN\\s+(?:IF EXISTS\\s+)?${NAME}`, "gi"))) columns.push(`${m[1]}.${m[2]}`);
  for (const m of text.matchAll(new RegExp(`ALTER TABLE\\s+${TABLE}\\s+RENAME COLUMN\\s+${NAME}`, "gi"))) columns.push(`${m[1]}.${m[2]}`);
  return { tables, columns };
}

export type MigrationSource = {
  journal: JournalEntry[];
  snapshot(idx: number): unknown;
  sql(tag: string): string;
};

/**
 * Where the migrations break the release before theirs: each release's migrations
 * (and the unreleased ones, the next release's) are checked against the schema of
 * the release before, its last migration's snapshot, which is what that release's
 * code reads and writes. They may not drop or rename a table or column it still has
 * (by their SQL, and by the schema after them: a SQLite rebuild that loses a column),
 * nor add to one of its tables a NOT NULL column without a default (its inserts
 * would fail). The first release listed has none before it to keep running.
 */
export function expandContractViolations(releases: Release[], src: MigrationSource): string[] {
  const at = (tag: string) => {
    const e = src.journal.find((j) => j.tag === tag);
    if (!e) throw new Error(`releases.json names migration ${tag}, which the journal does not have`);
    return e.idx;
  };
  const found = new Set<string>();
  const segments = releases.slice(1).map((r, k) => ({ name: r.version, prev: releases[k]!, until: at(r.lastMigration) }));
  const last = releases.at(-1);
  if (last) segments.push({ name: `the release after ${last.version}`, prev: last, until: Math.max(...src.journal.map((j) => j.idx)) });
  for (const seg of segments) {
    const fromIdx = at(seg.prev.lastMigration);
    const migrations = src.journal.filter((j) => j.idx > fromIdx && j.idx <= seg.until);
    if (migrations.length === 0) continue;
    const before = snapshotSchema(src.snapshot(fromIdx));
    const after = snapshotSchema(src.snapshot(seg.until));
    const still = `which ${seg.prev.version}'s schema still has: drop it a release after the one whose code stops using it`;
    for (const [table, cols] of before) {
      const now = after.get(table);
      if (!now) found.add(`${seg.name} loses table ${table}, ${still}`);
      else for (const col of cols.keys()) if (!now.has(col)) found.add(`${seg.name} loses column ${table}.${col}, ${still}`);
    }
    for (const [table, cols] of after) {
      const had = before.get(table);
      if (!had) continue;
      for (const [col, c] of cols)
        if (!had.has(col) && c.notNull && !c.hasDefault && !c.primaryKey)
          found.add(`${seg.name} adds ${table}.${col} NOT NULL without a default: ${seg.prev.version}'s inserts into ${table} would fail`);
    }
    for (const m of migrations) {
      const removed = removedBySql(src.sql(m.tag));
      for (const t of removed.tables) if (before.has(t)) found.add(`${seg.name} loses table ${t}, ${still}`);
      for (const tc of removed.columns) {
        const [t, c] = tc.split(".") as [string, string];
        if (before.get(t)?.has(c)) found.add(`${seg.name} loses column ${tc}, ${still}`);
      }
    }
  }
  return [...found];
}

/** The checked-in migrations of `dialect` as expandContractViolations reads them. */
export function migrationSource(dialect: Dialect, root = MIGRATIONS_ROOT): MigrationSource {
  const dir = path.join(root, dialect);
  return {
    journal: readJournal(dialect, root),
    snapshot: (idx) => JSON.parse(fs.readFileSync(path.join(dir, "meta", `${String(idx).padStart(4, "0")}_snapshot.json`), "utf8")),
    sql: (tag) => fs.readFileSync(path.join(dir, `${tag}.sql`), "utf8"),
  };
}
