import { randomBytes } from "node:crypto";
import postgres from "postgres";

/**
 * A database a test suite runs against. Which dialects a suite runs on is
 * decided by @cm/testkit's describeEachDatabase: SQLite always, PostgreSQL
 * where it answers (skipped with the reason otherwise, a failure under CI=true).
 */
export type TestDatabase = { name: "sqlite" | "postgres"; create(): Promise<{ url: string; drop(): Promise<void> }> };

/** The server tests and benchmarks make their databases on. */
export const testPostgresUrl = (env: NodeJS.ProcessEnv = process.env): string =>
  env.TEST_POSTGRES_URL ?? "postgres://postgres:postgres@127.0.0.1:5432/postgres";

export const sqliteDatabase: TestDatabase = { name: "sqlite", create: async () => ({ url: "file::memory:", drop: async () => undefined }) };
export const postgresDatabase: TestDatabase = { name: "postgres", create: () => createPgDatabase() };

/** A fresh, empty database per call, so suites never see each other's rows. */
export async function createPgDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `cm_test_${randomBytes(6).toString("hex")}`;
  const admin = postgres(testPostgresUrl(), { max: 1, onnotice: () => undefined });
  await admin.unsafe(`create database ${name}`);
  await admin.end();
  const url = new URL(testPostgresUrl());
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const a = postgres(testPostgresUrl(), { max: 1, onnotice: () => undefined });
      await a.unsafe(`drop database if exists ${name} with (force)`);
      await a.end();
    },
  };
}
