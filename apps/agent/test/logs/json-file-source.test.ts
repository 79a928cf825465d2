// JsonFileLogSource on files laid out and rotated the way Docker's json-file driver does it.
import { appendFileSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/logger";
import { JsonFileLogSource } from "../../src/logs/json-file-source";
import type { LogLine } from "../../src/runtime/types";

let dir = "";
let path = "";
let source: JsonFileLogSource | undefined;
let n = 0;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "cm-json-file-"));
  path = join(dir, "abc-json.log");
  n = 0;
});
afterEach(async () => {
  await source?.close();
  source = undefined;
  rmSync(dir, { recursive: true, force: true });
});

const ts = (i: number) => `2026-01-01T00:00:${String(Math.floor(i / 1000)).padStart(2, "0")}.${String((i % 1000) * 1_000_000 + 7).padStart(9, "0")}Z`;
const entry = (log: string, time: string, stream = "stdout") => `${JSON.stringify({ log, stream, time })}\n`;

/** Appends `count` numbered lines ("line <n>") to the current file. */
function write(count: number, stream = "stdout"): void {
  let text = "";
  for (let i = 0; i < count; i++) text += entry(`line ${++n}\n`, ts(n), stream);
  appendFileSync(path, text);
}

/** What Docker does at max-size: shift <path>.k to <path>.k+1, <path> to <path>.1, start a new <path>. */
function rotate(maxFile = 3): void {
  for (let k = maxFile - 1; k >= 1; k--) {
    try {
      if (k === maxFile - 1) rmSync(`${path}.${k}`, { force: true });
      else renameSync(`${path}.${k}`, `${path}.${k + 1}`);
    } catch {
      // not there yet
    }
  }
  renameSync(path, `${path}.1`);
  writeFileSync(path, "");
}

/** A new source, as a new shipper (after a reconnect or a restart) makes. */
async function reopen(): Promise<void> {
  await source?.close();
  source = undefined;
}

const messages = (lines: LogLine[]) => lines.map((l) => l.message);
const numbers = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `line ${from + i}`);

async function readAll(after: { seq: number; dockerTs: string | null }): Promise<LogLine[]> {
  source ??= new JsonFileLogSource(path, silentLogger);
  return source.readNew(after);
}

describe("JsonFileLogSource", () => {
  it("reads every line from the start, then only what was added", async () => {
    write(3);
    const first = await readAll({ seq: 0, dockerTs: null });
    expect(first).toEqual([
      { timestamp: "2026-01-01T00:00:00.001Z", dockerTimestamp: ts(1), stream: "stdout", message: "line 1" },
      expect.objectContaining({ message: "line 2" }),
      expect.objectContaining({ message: "line 3" }),
    ]);
    expect(await readAll({ seq: 3, dockerTs: ts(3) })).toEqual([]);
    write(2, "stderr");
    expect(await readAll({ seq: 3, dockerTs: ts(3) })).toEqual([
      expect.objectContaining({ message: "line 4", stream: "stderr" }),
      expect.objectContaining({ message: "line 5" }),
    ]);
  });

  it("follows rotation, reading the renamed file to its end first", async () => {
    write(5);
    expect(messages(await readAll({ seq: 0, dockerTs: null }))).toEqual(numbers(1, 5));
    write(5); // unread when the file is rotated
    rotate();
    write(5);
    expect(messages(await readAll({ seq: 5, dockerTs: ts(5) }))).toEqual(numbers(6, 15));
    rotate();
    rotate(); // twice before the next read: the file in between is not skipped
    write(1);
    expect(messages(await readAll({ seq: 15, dockerTs: ts(15) }))).toEqual(numbers(16, 16));
  });

  it("starts after the cursor line, in whichever file holds it", async () => {
    write(10);
    rotate();
    write(10);
    rotate();
    write(10);
    expect(messages(await readAll({ seq: 7, dockerTs: ts(7) }))).toEqual(numbers(8, 30));
    await reopen();
    expect(messages(await readAll({ seq: 25, dockerTs: ts(25) }))).toEqual(numbers(26, 30));
    await reopen();
    // A cursor between two lines (its line is gone): the first line stamped later.
    expect(messages(await readAll({ seq: 14, dockerTs: "2026-01-01T00:00:00.014500000Z" }))).toEqual(numbers(15, 30));
  });

  it("takes the whole log for a cursor older than it (a new run's container)", async () => {
    write(4);
    expect(messages(await readAll({ seq: 99, dockerTs: "2025-01-01T00:00:00Z" }))).toEqual(numbers(1, 4));
  });

  it("joins the pieces of a long line and waits for a line's missing end", async () => {
    const time = ts(1);
    appendFileSync(path, entry("a".repeat(16_384), time) + entry("b".repeat(100), time, "stderr") + entry("c\n", time));
    const half = entry("d\n", ts(2));
    appendFileSync(path, half.slice(0, 10));
    const lines = await readAll({ seq: 0, dockerTs: null });
    expect(lines).toEqual([expect.objectContaining({ stream: "stdout", message: `${"a".repeat(16_384)}c`, dockerTimestamp: time })]);
    appendFileSync(path, half.slice(10) + entry("stderr end\r\n", ts(3), "stderr"));
    expect(await readAll({ seq: 1, dockerTs: time })).toEqual([
      expect.objectContaining({ message: "d" }),
      expect.objectContaining({ stream: "stderr", message: `${"b".repeat(100)}stderr end` }),
    ]);
  });

  it("returns nothing until the file exists", async () => {
    expect(await readAll({ seq: 0, dockerTs: null })).toEqual([]);
    await reopen();
    write(1);
    expect(messages(await readAll({ seq: 0, dockerTs: null }))).toEqual(["line 1"]);
  });

  it("finds the cursor again when the caller did not take every line it was given", async () => {
    write(10);
    expect(messages(await readAll({ seq: 0, dockerTs: null }))).toHaveLength(10);
    // The shipper sent only 5 before waiting for acknowledgements.
    expect(messages(await readAll({ seq: 5, dockerTs: ts(5) }))).toEqual(numbers(6, 10));
    write(1);
    expect(messages(await readAll({ seq: 10, dockerTs: ts(10) }))).toEqual(numbers(11, 11));
  });
});
