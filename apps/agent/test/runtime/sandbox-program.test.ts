// The pause program and its archive, checked as bytes and by running them:
// x86-64 natively, aarch64 under qemu-user (skipped without qemu-user-static, outside CI).
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { needs } from "@cm/testkit";
import { describe, expect, it } from "vitest";
import type { SandboxArch } from "../../src/runtime/sandbox-program";
import { pauseProgram, singleFileTar } from "../../src/runtime/sandbox-program";

const dir = mkdtempSync(join(tmpdir(), "cm-pause-"));
const QEMU_AARCH64 = "/usr/bin/qemu-aarch64-static";

function written(arch: SandboxArch): string {
  const path = join(dir, `pause-${arch}`);
  writeFileSync(path, pauseProgram(arch), { mode: 0o755 });
  return path;
}

/** CPU time the process has used, in clock ticks (utime + stime of /proc/PID/stat). */
function cpuTicks(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8")
    .replace(/^.*\) /, "")
    .split(" ");
  return Number(fields[11]) + Number(fields[12]);
}

/**
 * Runs it and checks it stays, asleep (a loop that spun instead of sleeping
 * would burn a core), then SIGTERMs it: how it ends when its sandbox goes.
 */
async function blocksUntilSignalled(command: string, args: string[]): Promise<NodeJS.Signals | number | null> {
  const child = spawn(command, args, { stdio: "ignore" });
  let ended: NodeJS.Signals | number | null | undefined;
  const exit = new Promise<void>((resolve) =>
    child.once("exit", (code, signal) => {
      ended = signal ?? code;
      resolve();
    }),
  );
  await new Promise((resolve) => setTimeout(resolve, 300)); // qemu's own start-up takes CPU
  const before = cpuTicks(child.pid!);
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect(ended, "exited by itself instead of blocking").toBeUndefined();
  expect(cpuTicks(child.pid!) - before, "spins instead of sleeping").toBeLessThanOrEqual(2);
  child.kill("SIGTERM");
  await exit;
  return ended ?? null;
}

describe("pauseProgram", () => {
  it.each([
    ["x86_64", 62],
    ["aarch64", 183],
  ] as const)("is a static ELF64 executable for %s", (arch, machine) => {
    const elf = pauseProgram(arch);
    expect(elf.subarray(0, 4).toString("latin1")).toBe("\x7fELF");
    expect([elf[4], elf[5]]).toEqual([2, 1]); // 64-bit, little-endian
    expect(elf.readUInt16LE(16)).toBe(2); // ET_EXEC
    expect(elf.readUInt16LE(18)).toBe(machine);
    expect(elf.readBigUInt64LE(24)).toBe(0x400000n + 120n); // entry right after the headers
    expect(elf.readUInt32LE(64)).toBe(1); // PT_LOAD
    expect(elf.readBigUInt64LE(64 + 32)).toBe(BigInt(elf.length)); // the whole file is loaded
    expect(elf.length).toBeLessThan(200);
  });

  it("blocks until signalled on x86-64", async () => {
    expect(await blocksUntilSignalled(written("x86_64"), [])).toBe("SIGTERM");
  });

  needs("qemu-aarch64").it("blocks until signalled on aarch64 (under qemu)", async () => {
    expect(await blocksUntilSignalled(QEMU_AARCH64, [written("aarch64")])).toBe("SIGTERM");
  });
});

describe("singleFileTar", () => {
  it("is an archive tar itself reads back, byte for byte", () => {
    const content = pauseProgram("x86_64");
    const archive = join(dir, "one.tar");
    writeFileSync(archive, singleFileTar("pause", content));
    expect(execFileSync("tar", ["-tvf", archive], { encoding: "utf8" })).toMatch(/^-r-xr-xr-x 0\/0\s+129 1970-01-01 00:00 pause\n$/);
    expect(execFileSync("tar", ["-xOf", archive, "pause"]).equals(content)).toBe(true);
    expect(singleFileTar("pause", content).length % 512).toBe(0);
  });

  it("is the same for the same program, so the image tag is stable", () => {
    expect(singleFileTar("pause", pauseProgram("aarch64")).equals(singleFileTar("pause", pauseProgram("aarch64")))).toBe(true);
  });
});
