import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { databaseInUse, lockDatabase } from "@cm/db";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../faults/support/pg-cluster";
import { type Program, startProgram } from "../faults/support/processes";

// SQLite is the single-process default: a second control plane on the same file
// would run metering and the payout sender a second time.
describe("one control plane per embedded database", () => {
  const dir = mkdtempSync(join(tmpdir(), "cm-lock-"));
  const file = join(dir, "data", "marketplace.db");
  const started: Program[] = [];
  afterAll(async () => {
    for (const p of started) await p.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async () => {
    const p = startProgram("control-plane", "apps/control-plane/src/index.ts", [], {
      PORT: String(await freePort()),
      HOST: "127.0.0.1",
      DATABASE_URL: `file:${file}`,
      LOG_LEVEL: "info",
    });
    started.push(p);
    return p;
  };

  it("refuses a second process on the same file with what to do, and starts again at once after the first was killed", async () => {
    const first = await start();
    await first.waitForLine(/control plane listening on/);
    expect(databaseInUse(file)).toBe(true);

    const second = await start();
    expect(await second.exited).toBe(78);
    expect(second.tail()).toContain(`another control plane is running on ${file}`);
    expect(second.tail()).toContain("use PostgreSQL");
    expect(first.running).toBe(true);

    // SIGKILL leaves no stale lock: the kernel drops it with the process.
    first.signal("SIGKILL");
    await first.exited;
    expect(databaseInUse(file)).toBe(false);
    const third = await start();
    await third.waitForLine(/control plane listening on/);
    await third.stop();
    expect(databaseInUse(file)).toBe(false);
  });

  it("is held by one holder at a time within a process too, and released by release()", () => {
    const other = join(dir, "other.db");
    const lock = lockDatabase(other);
    expect(() => lockDatabase(other)).toThrow(/another control plane is running/);
    lock.release();
    lockDatabase(other).release();
  });
});
