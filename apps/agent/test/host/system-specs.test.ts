import { describe, expect, it } from "vitest";
import type { SystemSnapshot } from "../../src/host/system-specs";
import { toNodeSpecs } from "../../src/host/system-specs";
import { readJsonFixture } from "../support/fixtures";

const snapshot = (file: string) => readJsonFixture<SystemSnapshot>(`systeminformation/${file}`);
const engine = { containerVersion: "27.3.1", dockerDataRoot: "/var/lib/docker" };

describe("toNodeSpecs", () => {
  it("maps a VM where diskLayout is empty and the NIC speed unknown (recorded on the dev VM)", () => {
    expect(toNodeSpecs(snapshot("debian12-vm.json"), engine)).toEqual({
      cpuModel: "AMD EPYC",
      cpuCores: 2,
      cpuThreads: 2,
      ramMb: 24105,
      diskGb: 270,
      diskType: "HDD",
      networkSpeedMbps: 0,
      os: "Debian GNU/Linux 12 (6.18.44-fc-v657)",
      containerVersion: "27.3.1",
    });
  });

  it("sizes the Docker data root's own filesystem on a GPU server, typed by its NVMe drives", () => {
    expect(toNodeSpecs(snapshot("gpu-server-nvme-raid.json"), engine)).toEqual({
      cpuModel: "AMD EPYC 9654 96-Core Processor",
      cpuCores: 192,
      cpuThreads: 384,
      ramMb: 1547766,
      diskGb: 15358,
      diskType: "NVMe",
      networkSpeedMbps: 25000,
      os: "Ubuntu 22.04.4 LTS (5.15.0-105-generic)",
      containerVersion: "27.3.1",
    });
  });

  it("falls back to / and reports the SSD that holds it, not the data HDD", () => {
    expect(toNodeSpecs(snapshot("workstation-sata.json"), engine)).toMatchObject({
      cpuModel: "Intel Core™ i9-13900K",
      cpuCores: 24,
      cpuThreads: 32,
      ramMb: 64157,
      diskGb: 982,
      diskType: "SSD",
      networkSpeedMbps: 1000,
    });
  });

  it("follows a Docker data root moved onto another disk", () => {
    const specs = toNodeSpecs(snapshot("workstation-sata.json"), { ...engine, dockerDataRoot: "/data/docker" });
    expect(specs).toMatchObject({ diskGb: 3936, diskType: "HDD" });
  });

  it("claims the slowest disk when the filesystem cannot be traced to one (LVM)", () => {
    const base = snapshot("workstation-sata.json");
    const lvm: SystemSnapshot = {
      ...base,
      fsSize: [{ fs: "/dev/mapper/ubuntu--vg-ubuntu--lv", mount: "/", size: 982820896768 }],
    };
    expect(toNodeSpecs(lvm, engine).diskType).toBe("HDD");
  });

  it("does not take /data for a prefix of /database", () => {
    const base = snapshot("workstation-sata.json");
    const specs = toNodeSpecs(base, { ...engine, dockerDataRoot: "/database/docker" });
    expect(specs.diskGb).toBe(982);
  });
});
