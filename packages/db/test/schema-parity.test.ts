import { is } from "drizzle-orm";
import { PgTable, getTableConfig as pgConfig } from "drizzle-orm/pg-core";
import { SQLiteTable, getTableConfig as sqliteConfig } from "drizzle-orm/sqlite-core";
import { describe, expect, it } from "vitest";
import * as pg from "../src/schema/pg";
import * as sqlite from "../src/schema/sqlite";

type Shape = {
  columns: Record<string, { notNull: boolean; primary: boolean; unique: boolean; enumValues: readonly string[] | undefined; default: unknown }>;
  indexes: Record<string, { columns: string[]; unique: boolean }>;
};

/** What the repositories rely on of a table, in words both dialects share; column types differ by design (bigint vs integer, jsonb vs text). */
function shape(config: ReturnType<typeof pgConfig> | ReturnType<typeof sqliteConfig>): Shape {
  const columns: Shape["columns"] = {};
  for (const c of config.columns) {
    columns[c.name] = { notNull: c.notNull, primary: c.primary, unique: c.isUnique, enumValues: c.enumValues, default: c.default };
  }
  const indexes: Shape["indexes"] = {};
  for (const i of config.indexes) {
    const name = i.config.name!;
    indexes[name] = { columns: i.config.columns.map((c) => ("name" in c ? String(c.name) : "<expression>")), unique: i.config.unique };
  }
  return { columns, indexes };
}

function shapes<T>(
  schema: Record<string, unknown>,
  isTable: (x: unknown) => x is T,
  config: (t: T) => ReturnType<typeof pgConfig> | ReturnType<typeof sqliteConfig>,
) {
  const out: Record<string, Shape> = {};
  for (const value of Object.values(schema)) {
    if (!isTable(value)) continue;
    const c = config(value);
    out[c.name] = shape(c);
  }
  return out;
}

describe("the SQLite and PostgreSQL schemas", () => {
  const onPg = shapes(pg, (x): x is PgTable => is(x, PgTable), pgConfig);
  const onSqlite = shapes(sqlite, (x): x is SQLiteTable => is(x, SQLiteTable), sqliteConfig);

  it("declare the same tables", () => {
    expect(Object.keys(onSqlite).sort()).toEqual(Object.keys(onPg).sort());
    expect(Object.keys(onPg).length).toBeGreaterThan(0);
  });

  for (const table of Object.keys(onPg)) {
    it(`declare the same columns and indexes for ${table}`, () => {
      expect(onSqlite[table]).toEqual(onPg[table]);
    });
  }

  it("type the state columns with their lists of values", () => {
    expect(onPg.deployments!.columns.status!.enumValues).toContain("running");
    expect(onPg.deployments!.columns.desired_state!.enumValues).toEqual(["running", "stopped", "removed"]);
    expect(onPg.nodes!.columns.status!.enumValues).toContain("online");
  });
});
