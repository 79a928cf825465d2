import type { TestDatabase } from "@cm/db/testing";
import { postgresDatabase, sqliteDatabase } from "@cm/db/testing";
import { describe } from "vitest";
import { needs } from "./needs";

/**
 * Declares a suite once per dialect: on SQLite always, on PostgreSQL where it
 * answers (skipped with the reason otherwise; under CI=true a failure).
 * `$name` in the title becomes the dialect's name.
 */
export function describeEachDatabase(title: string, factory: (db: TestDatabase) => void): void {
  describe(title.replace("$name", sqliteDatabase.name), () => factory(sqliteDatabase));
  needs("postgres").describe(title.replace("$name", postgresDatabase.name), () => factory(postgresDatabase));
}
