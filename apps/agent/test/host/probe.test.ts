import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SystemHostProbe } from "../../src/host/probe";
import { readFixture } from "../support/fixtures";

const scratch = mkdtempSync(join(tmpdir(), "cm-probe-test-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A stand-in nvidia-smi: a shell script printing what the real one would. */
function fakeNvidiaSmi(name: string, script: string): string {
  const path = join(scratch, name);
  writeFileSync(path, `#!/bin/sh\n${script}\n`);
  chmodSync(path, 0o755);
  return path;
}

describe("SystemHostProbe on this machine", () => {
  it("reports sane specs", async () => {
    const probe = new SystemHostProbe({ dockerEngine: async () => ({ version: "20.10.24", dataRoot: "/var/lib/docker" }) });
    const specs = await probe.specs();
    expect(specs.cpuModel.length).toBeGreaterThan(0);
    expect(specs.cpuCores).toBeGreaterThan(0);
    expect(specs.cpuThreads).toBeGreaterThanOrEqual(specs.cpuCores);
    expect(specs.ramMb).toBeGreaterThan(256);
    expect(specs.diskGb).toBeGreaterThan(0);
    expect(["NVMe", "SSD", "HDD"]).toContain(specs.diskType);
    expect(specs.networkSpeedMbps).toBeGreaterThanOrEqual(0);
    expect(specs.os).toMatch(/\(.+\)$/);
    expect(specs.containerVersion).toBe("20.10.24");
    for (const value of [specs.cpuCores, specs.cpuThreads, specs.ramMb, specs.diskGb, specs.networkSpeedMbps]) {
      expect(Number.isInteger(value)).toBe(true);
    }
  });

  it('reports containerVersion "unknown" when Docker cannot be asked', async () => {
    const probe = new SystemHostProbe({ dockerEngine: () => Promise.reject(new Error("connect ENOENT /var/run/docker.sock")) });
    expect((await probe.specs()).containerVersion).toBe("unknown");
  });

  it("finds no GPU here (no nvidia-smi) and says why", async () => {
    const result = await new SystemHostProbe().gpus();
    expect(result.gpus).toEqual([]);
    expect(result.warning ?? result.note).toMatch(/nvidia-smi was not found|no NVIDIA device/);
  });
});

describe("SystemHostProbe.gpus without nvidia-smi", () => {
  /** A stand-in for sysfs's /sys/bus/pci/devices: one folder per device with its vendor id. */
  function pciDevices(name: string, vendors: string[]): string {
    const dir = join(scratch, name);
    vendors.forEach((vendor, i) => {
      mkdirSync(join(dir, `0000:00:0${i}.0`), { recursive: true });
      writeFileSync(join(dir, `0000:00:0${i}.0`, "vendor"), `${vendor}\n`);
    });
    return dir;
  }
  const missing = join(scratch, "no-nvidia-smi");

  it("warns when an NVIDIA device is there: its driver is what is missing", async () => {
    const result = await new SystemHostProbe({ nvidiaSmiPath: missing, pciDevicesDir: pciDevices("with-nvidia", ["0x8086", "0x10de"]) }).gpus();
    expect(result).toEqual({ gpus: [], warning: `${missing} was not found: no NVIDIA driver is installed on this machine` });
  });

  it("only notes a machine with no NVIDIA device (a CPU-only node, nothing to fix), so npm start warns of nothing", async () => {
    const result = await new SystemHostProbe({ nvidiaSmiPath: missing, pciDevicesDir: pciDevices("without-nvidia", ["0x8086", "0x1af4"]) }).gpus();
    expect(result).toEqual({ gpus: [], note: "no NVIDIA device on this machine's PCI bus" });
  });

  it("warns where it cannot tell (no sysfs)", async () => {
    const result = await new SystemHostProbe({ nvidiaSmiPath: missing, pciDevicesDir: join(scratch, "no-sysfs") }).gpus();
    expect(result.warning).toMatch(/was not found: no NVIDIA driver/);
  });
});

describe("SystemHostProbe.gpus with a stand-in nvidia-smi", () => {
  it("runs the query and parses it", async () => {
    const path = fakeNvidiaSmi("ok", `cat <<'EOF'\n${readFixture("nvidia-smi/h100-8x.txt")}EOF`);
    const { gpus, warning } = await new SystemHostProbe({ nvidiaSmiPath: path }).gpus();
    expect(warning).toBeUndefined();
    expect(gpus).toHaveLength(8);
    expect(gpus[0]).toMatchObject({ index: 0, name: "NVIDIA H100 80GB HBM3", computeCores: 16896 });
  });

  it("asks again without compute_cap when an old driver rejects it", async () => {
    const legacyRow = readFixture("nvidia-smi/legacy-driver-tesla-v100.txt").trim();
    const path = fakeNvidiaSmi(
      "legacy",
      `case "$1" in *compute_cap*) echo 'Field "compute_cap" is not a valid field to query.'; echo; exit 2;; esac\necho '${legacyRow}'`,
    );
    const { gpus, warning } = await new SystemHostProbe({ nvidiaSmiPath: path }).gpus();
    expect(warning).toBeUndefined();
    expect(gpus).toEqual([expect.objectContaining({ name: "Tesla V100-SXM2-32GB", computeVersion: "7.0", driverVersion: "470.182.03" })]);
  });

  it("reads the driver failure that nvidia-smi prints with a non-zero exit", async () => {
    const path = fakeNvidiaSmi("nodriver", `cat <<'EOF'\n${readFixture("nvidia-smi/driver-communication-error.txt")}EOF\nexit 9`);
    const { gpus, warning } = await new SystemHostProbe({ nvidiaSmiPath: path }).gpus();
    expect(gpus).toEqual([]);
    expect(warning).toMatch(/could not communicate with the NVIDIA driver/);
  });

  it("gives up on a hung nvidia-smi after the timeout", async () => {
    const path = fakeNvidiaSmi("hung", "sleep 5");
    const startedMs = Date.now();
    const { gpus, warning } = await new SystemHostProbe({ nvidiaSmiPath: path, nvidiaSmiTimeoutMs: 300 }).gpus();
    expect(gpus).toEqual([]);
    expect(warning).toMatch(/did not answer within 0.3 s/);
    expect(Date.now() - startedMs).toBeLessThan(3000);
  });

  it("reports an unexplained failure with its exit code", async () => {
    const path = fakeNvidiaSmi("silent", "exit 255");
    const { gpus, warning } = await new SystemHostProbe({ nvidiaSmiPath: path }).gpus();
    expect(gpus).toEqual([]);
    expect(warning).toBe("nvidia-smi failed (exit code 255): it printed nothing");
  });
});
