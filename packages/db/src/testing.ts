import postgres from "postgres";
import { randomBytes } from "node:crypto";

/**
 * The databases a test suite runs against: SQLite always, PostgreSQL when it can
 * be reached. Under CI=true an unreachable PostgreSQL is a failure, never a skip.
 */
export type TestDatabase = { name: "sqlite" | "postgres"; create(): Promise<{ url: string; drop(): Promise<void> }> };

const adminUrl = () => process.env.TEST_POSTGRES_URL ?? "postgres://postgres:postgres@127.0.0.1:5432/postgres";

let pgReachable: Promise<boolean> | undefined;
async function probePg(): Promise<boolean> {
  const sql = postgres(adminUrl(), { max: 1, connect_timeout: 3, onnotice: () => undefined });
  try {
    await sql`select 1`;
    return true;
  } catch {
    return false;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

export async function testDatabases(): Promise<TestDatabase[]> {
  const dbs: TestDatabase[] = [{ name: "sqlite", create: async () => ({ url: "file::memory:", drop: async () => undefined }) }];
  pgReachable ??= probePg();
  if (await pgReachable) {
    dbs.push({ name: "postgres", create: createPgDatabase });
  } else if (process.env.CI === "true") {
    throw new Error(`PostgreSQL is not reachable at ${adminUrl()} and CI=true: database tests must run on both dialects`);
  } else {
    console.warn(`[tests] PostgreSQL not reachable at ${adminUrl()}: running SQLite only (set TEST_POSTGRES_URL)`);
  }
  return dbs;
}

/** A fresh, empty database per call, so suites never see each other's rows. */
export async function createPgDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `cm_test_${randomBytes(6).toString("hex")}`;
  const admin = postgres(adminUrl(), { max: 1, onnotice: () => undefined });
  await admin.unsafe(`create database ${name}`);
  await admin.end();
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const a = postgres(adminUrl(), { max: 1, onnotice: () => undefined });
      await a.unsafe(`drop database if exists ${name} with (force)`);
      await a.end();
    },
  };
}
