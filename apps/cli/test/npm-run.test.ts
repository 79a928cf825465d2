// cm as the README runs it from a checkout, `npm run --silent cm -- ...`: npm starts it in the
// repository's root, but the paths a user types are from the folder they typed them in.
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

describe("npm run cm", () => {
  mkdirSync(join(ROOT, "dist"), { recursive: true });
  const here = mkdtempSync(join(ROOT, "dist", "cm-cwd-"));
  afterAll(() => rmSync(here, { recursive: true, force: true }));

  it("resolves a relative path from the folder it was run in, not the repository's root", async () => {
    const run = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile("npm", ["run", "--silent", "cm", "--", "keygen", "--outfile", "./wallet.json"], { cwd: here }, (error, _stdout, stderr) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, stderr }),
      ),
    );
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(readFileSync(join(here, "wallet.json"), "utf8"))).toHaveLength(64);
    expect(existsSync(join(ROOT, "wallet.json"))).toBe(false);
  }, 60_000);
});
