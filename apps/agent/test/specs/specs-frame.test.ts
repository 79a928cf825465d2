import { parseFrame, SpecsFrame } from "@cm/protocol";
import { describe, expect, it } from "vitest";
import { specsFrame } from "../../src/specs/specs-reporter";

// The control plane refuses a specs frame whose labels carry control characters (they would
// act on tenants' terminals); the agent sends its hardware's strings without them, so a
// firmware or driver string with a tab or an escape cannot keep its node out of the catalogue.

const specs = {
  cpuModel: "AMD\tEPYC 7763\u001b[0m ",
  cpuCores: 32,
  cpuThreads: 64,
  ramMb: 128_000,
  diskGb: 2000,
  diskType: "NVMe" as const,
  networkSpeedMbps: 10_000,
  os: "Ubuntu 22.04\r\n(6.8.0)",
  containerVersion: "27.0.3",
};
const gpu = {
  index: 0,
  uuid: "GPU-0",
  name: "NVIDIA H100\u009b",
  vramMb: 81_920,
  computeVersion: "9.0",
  driverVersion: "550.54.15\u202e",
  brand: "NVIDIA",
  computeCores: 16_896,
  tensorCores: 528,
};

describe("the specs frame", () => {
  it("carries the hardware's labels without control characters, and the control plane's schema takes it", () => {
    const frame = specsFrame({ specs, gpus: { gpus: [gpu] } });
    // Only the control characters go: what followed an ESC is plain text then.
    expect(frame.specs).toMatchObject({ cpuModel: "AMD EPYC 7763 [0m", os: "Ubuntu 22.04 (6.8.0)", cpuCores: 32 });
    expect(frame.gpus[0]).toMatchObject({ name: "NVIDIA H100", driverVersion: "550.54.15", vramMb: 81_920 });
    expect(parseFrame(SpecsFrame, JSON.stringify(frame)).ok).toBe(true);
    // The same labels as they came are refused: what the agent must not send.
    expect(parseFrame(SpecsFrame, JSON.stringify({ ...frame, specs })).ok).toBe(false);
  });
});
