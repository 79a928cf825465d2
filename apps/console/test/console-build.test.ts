import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { consoleStaleness } from "../../../scripts/console-build";

// npm start builds the console only when this says so: a start after the first must cost file stats, not a build.

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cm-console-dist-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

it("asks for a build when there is none, or when a source is newer than the build, and not otherwise", () => {
  expect(consoleStaleness(dir)).toBe("it is not built");
  const index = path.join(dir, "index.html");
  fs.writeFileSync(index, "<!doctype html>");
  // Built after every source was last written: fresh.
  const later = new Date(Date.now() + 3_600_000);
  fs.utimesSync(index, later, later);
  expect(consoleStaleness(dir)).toBeUndefined();
  // Built before the sources (the console's, the SDK's, the protocol's) were last written: stale.
  fs.utimesSync(index, new Date(0), new Date(0));
  expect(consoleStaleness(dir)).toBe("its sources changed since it was built");
});
