import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const FIXTURES_DIR = fileURLToPath(new URL("../fixtures/", import.meta.url));

/** Text of a recorded output under test/fixtures, byte for byte. */
export function readFixture(relativePath: string): string {
  return readFileSync(`${FIXTURES_DIR}${relativePath}`, "utf8");
}

export function readJsonFixture<T>(relativePath: string): T {
  return JSON.parse(readFixture(relativePath)) as T;
}

export function readFixtureBytes(relativePath: string): Buffer {
  return readFileSync(`${FIXTURES_DIR}${relativePath}`);
}
