// The rule that lets release N-1 run on a database release N migrated (a rolling
// upgrade): migrations expand, then contract a release later. Checked on the
// checked-in migrations of both databases, and shown to catch a contract made too
// early with this project's own history: 0011 dropped nodes.online_since and
// online_ms_total, which the code that 0010 shipped still read.
import { describe, expect, it } from "vitest";
import { expandContractViolations, migrationSource, readJournal, readReleases, removedBySql, thisBuild } from "../src/releases";

const DIALECTS = ["sqlite", "pg"] as const;

describe("releases.json", () => {
  it("names each release once, oldest first, by a migration both databases have", () => {
    const releases = readReleases();
    expect(releases.length).toBeGreaterThan(0);
    expect(new Set(releases.map((r) => r.version)).size).toBe(releases.length);
    for (const dialect of DIALECTS) {
      const idx = releases.map((r) => readJournal(dialect).find((j) => j.tag === r.lastMigration)?.idx);
      expect(idx.every((i) => i !== undefined)).toBe(true);
      expect([...idx].sort((a, b) => a! - b!)).toEqual(idx);
    }
  });

  it.each(DIALECTS)("no release drops, renames or requires what the release before it still uses (%s)", (dialect) => {
    expect(expandContractViolations(readReleases(), migrationSource(dialect))).toEqual([]);
  });

  it.each(DIALECTS)("a contract in the same release that stopped using it fails the check (%s: 0011 right after 0010)", (dialect) => {
    const early = [
      { version: "0.0.10", lastMigration: "0010_node_agent_version" },
      { version: "0.0.11", lastMigration: "0011_drop_node_online_totals" },
    ];
    expect(expandContractViolations(early, migrationSource(dialect)).sort()).toEqual([
      "0.0.11 loses column nodes.online_ms_total, which 0.0.10's schema still has: drop it a release after the one whose code stops using it",
      "0.0.11 loses column nodes.online_since, which 0.0.10's schema still has: drop it a release after the one whose code stops using it",
    ]);
  });

  it.each(DIALECTS)("a migration the snapshots do not show (written by hand) is still caught by its SQL (%s)", (dialect) => {
    const src = migrationSource(dialect);
    const journal = src.journal.slice(0, 2);
    const handWritten = {
      journal,
      snapshot: (idx: number) => src.snapshot(idx === 1 ? 0 : idx),
      sql: (tag: string) =>
        tag === journal[1]!.tag ? 'ALTER TABLE "users" RENAME COLUMN "wallet_address" TO "wallet";\nDROP TABLE `settings`;' : src.sql(tag),
    };
    expect(expandContractViolations([{ version: "a", lastMigration: journal[0]!.tag }], handWritten).sort()).toEqual([
      "the release after a loses column users.wallet_address, which a's schema still has: drop it a release after the one whose code stops using it",
      "the release after a loses table settings, which a's schema still has: drop it a release after the one whose code stops using it",
    ]);
  });

  it("a NOT NULL column without a default on a table the release before writes fails the check", () => {
    const src = migrationSource("pg");
    const withColumn = (idx: number) => {
      const snap = structuredClone(src.snapshot(idx)) as { tables: Record<string, { columns: Record<string, unknown> }> };
      if (idx === 1) snap.tables["public.nodes"]!.columns.zone = { name: "zone", type: "text", primaryKey: false, notNull: true };
      return snap;
    };
    const journal = src.journal.slice(0, 2);
    expect(expandContractViolations([{ version: "a", lastMigration: journal[0]!.tag }], { ...src, journal, snapshot: withColumn })).toEqual([
      "the release after a adds nodes.zone NOT NULL without a default: a's inserts into nodes would fail",
    ]);
  });

  it("reads a SQLite table rebuild as a rebuild, not a dropped table", () => {
    const rebuild =
      'CREATE TABLE `__new_nodes` (`id` text PRIMARY KEY NOT NULL);\nINSERT INTO `__new_nodes`("id") SELECT "id" FROM `nodes`;\nDROP TABLE `nodes`;\nALTER TABLE `__new_nodes` RENAME TO `nodes`;';
    expect(removedBySql(rebuild)).toEqual({ tables: [], columns: [] });
    expect(removedBySql('ALTER TABLE "public"."nodes" DROP COLUMN IF EXISTS "x";ALTER TABLE "a" RENAME TO "b";')).toEqual({
      tables: ["a"],
      columns: ["nodes.x"],
    });
  });

  it.each(DIALECTS)("this build says which releases may run on a database it migrated (%s)", (dialect) => {
    const releases = readReleases();
    const build = thisBuild(dialect);
    const newest = readJournal(dialect).at(-1)!;
    expect(build.newest.tag).toBe(newest.tag);
    if (releases.at(-1)!.lastMigration === newest.tag) expect(build.label).toBe(releases.at(-1)!.version);
    else expect(build.label).toBe(`the release after ${releases.at(-1)!.version}`);
    // With a release after this one's migrations, the one before it may run: its last migration is the floor.
    const next = thisBuild(dialect, [...releases, { version: "99.0.0", lastMigration: newest.tag }]);
    expect(next.label).toBe("99.0.0");
    const before = releases.filter((r) => r.lastMigration !== newest.tag).at(-1);
    if (before) expect(next.runnableFrom.release).toBe(before.version);
  });
});
