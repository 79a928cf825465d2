// The install id: made once per state directory, read back ever after.
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { claimInstall, INSTALL_ID_FILE, LOCK_FILE, loadInstallId } from "../src/install-identity";
import type { Logger } from "../src/logger";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function stateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "cm-install-id-"));
  dirs.push(dir);
  return dir;
}

function recordingLogger(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  const logger: Logger & { warnings: string[] } = {
    debug: () => {},
    info: () => {},
    warn: (message) => warnings.push(message),
    error: () => {},
    child: () => logger,
    warnings,
  };
  return logger;
}

describe("loadInstallId", () => {
  it("makes an id the first time and answers the same one after", () => {
    const dir = join(stateDir(), "not-yet-made");
    const logger = recordingLogger();
    const id = loadInstallId(dir, logger);
    expect(id).toMatch(/^ins_[0-9a-f]{24}$/);
    expect(readFileSync(join(dir, INSTALL_ID_FILE), "utf8")).toBe(`${id}\n`);
    expect(loadInstallId(dir, logger)).toBe(id);
    expect(loadInstallId(stateDir(), logger)).not.toBe(id); // another state directory, another install
    expect(logger.warnings).toEqual([]);
  });

  it("goes without one, and says so, when the file is not an id or the directory cannot be written", () => {
    const garbled = stateDir();
    writeFileSync(join(garbled, INSTALL_ID_FILE), "hello\n");
    const logger = recordingLogger();
    expect(loadInstallId(garbled, logger)).toBeUndefined();
    expect(readFileSync(join(garbled, INSTALL_ID_FILE), "utf8")).toBe("hello\n"); // never overwritten: it may be an operator's mistake to fix
    if (process.getuid?.() !== 0) {
      const readOnly = stateDir();
      chmodSync(readOnly, 0o500);
      expect(loadInstallId(readOnly, logger)).toBeUndefined();
    }
    expect(logger.warnings.length).toBeGreaterThan(0);
  });
});

describe("claimInstall", () => {
  it("holds the state directory: a second agent meanwhile gets no install id, the next one after release does", () => {
    const dir = stateDir();
    const logger = recordingLogger();
    const first = claimInstall(dir, logger);
    expect(first.installId).toMatch(/^ins_/);
    const second = claimInstall(dir, logger);
    expect(second.installId).toBeUndefined();
    expect(logger.warnings).toEqual([expect.stringMatching(/Another running agent uses this state directory/)]);
    first.release();
    expect(claimInstall(dir, logger).installId).toBe(first.installId);
  });

  it("takes over from an agent that died holding it, even when its pid was reused", () => {
    const dir = stateDir();
    const logger = recordingLogger();
    const id = claimInstall(dir, logger).installId; // never released: as when killed
    writeFileSync(join(dir, LOCK_FILE), `${process.pid} 1\n`); // our pid, another start time: a reused pid
    expect(claimInstall(dir, logger).installId).toBe(id);
    writeFileSync(join(dir, LOCK_FILE), "999999999 123\n");
    expect(claimInstall(dir, logger).installId).toBe(id);
    expect(logger.warnings).toEqual([]);
  });
});
