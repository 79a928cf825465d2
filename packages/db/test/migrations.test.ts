import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const dbDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const drizzleKit = path.join(path.dirname(createRequire(import.meta.url).resolve("drizzle-kit")), "bin.cjs");
const scratch = mkdtempSync(path.join(tmpdir(), "cm-migrations-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Every file under dir with its text, by path relative to dir. */
function files(dir: string, under = ""): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of readdirSync(path.join(dir, under), { withFileTypes: true })) {
    const rel = path.join(under, e.name);
    if (e.isDirectory()) Object.assign(out, files(dir, rel));
    else out[rel] = readFileSync(path.join(dir, rel), "utf8");
  }
  return out;
}

// The same flags as drizzle.<dialect>.config.ts, with the output sent to a copy
// of the committed migrations: whatever drizzle-kit adds there is a migration
// the repository lacks.
describe.each([
  { dialect: "sqlite", drizzleDialect: "sqlite", schema: "./src/schema/sqlite.ts" },
  { dialect: "pg", drizzleDialect: "postgresql", schema: "./src/schema/pg.ts" },
])("the $dialect migrations", ({ dialect, drizzleDialect, schema }) => {
  it("are what drizzle-kit generates from the schema (else run npm run db:generate and commit the result)", async () => {
    const committed = path.join(dbDir, "migrations", dialect);
    const copy = path.join(scratch, dialect);
    cpSync(committed, copy, { recursive: true });
    // drizzle-kit reads --out relative to its working directory, even when absolute.
    const out = path.relative(dbDir, copy);
    const { stdout } = await promisify(execFile)(process.execPath, [drizzleKit, "generate", "--dialect", drizzleDialect, "--schema", schema, "--out", out], {
      cwd: dbDir,
      timeout: 60_000,
      env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0" },
    });
    const [want, got] = [files(committed), files(copy)];
    expect(Object.keys(got).sort(), `drizzle-kit generate said:\n${stdout}`).toEqual(Object.keys(want).sort());
    expect(got, `drizzle-kit generate said:\n${stdout}`).toEqual(want);
  });
});
