import { describe, expect, it } from "vitest";
import { isUnknownFieldError, LEGACY_GPU_QUERY_FIELDS, nvidiaSmiArgs, parseNvidiaSmiOutput } from "../../src/host/nvidia-smi";
import { readFixture } from "../support/fixtures";

const parse = (file: string) => parseNvidiaSmiOutput(readFixture(`nvidia-smi/${file}`));

const H100 = {
  name: "NVIDIA H100 80GB HBM3",
  vramMb: 81559,
  computeVersion: "9.0",
  driverVersion: "550.54.15",
  brand: "NVIDIA",
  computeCores: 16896,
  tensorCores: 528,
};

describe("parseNvidiaSmiOutput", () => {
  it("asks nvidia-smi for exactly the columns it parses", () => {
    expect(nvidiaSmiArgs()).toEqual(["--query-gpu=index,uuid,name,memory.total,compute_cap,driver_version,pci.bus_id", "--format=csv,noheader,nounits"]);
  });

  it("parses a single H100 80GB HBM3", () => {
    expect(parse("h100-80gb-hbm3.txt")).toEqual({
      gpus: [{ index: 0, uuid: "GPU-6513270e-269e-4d37-b2a7-4de452e6b438", ...H100 }],
    });
  });

  it("parses an A100-SXM4-80GB", () => {
    expect(parse("a100-sxm4-80gb.txt").gpus).toEqual([
      {
        index: 0,
        uuid: "GPU-d23f0824-128b-4f33-8c5c-7fd0a6a3a450",
        name: "NVIDIA A100-SXM4-80GB",
        vramMb: 81920,
        computeVersion: "8.0",
        driverVersion: "535.129.03",
        brand: "NVIDIA",
        computeCores: 6912,
        tensorCores: 432,
      },
    ]);
  });

  it("parses a GeForce RTX 4090", () => {
    expect(parse("rtx-4090.txt")).toEqual({
      gpus: [
        {
          index: 0,
          uuid: "GPU-9531985d-5d9d-49f8-9818-e811892f902b",
          name: "NVIDIA GeForce RTX 4090",
          vramMb: 24564,
          computeVersion: "8.9",
          driverVersion: "550.120",
          brand: "NVIDIA",
          computeCores: 16384,
          tensorCores: 512,
        },
      ],
    });
  });

  it("parses an 8x H100 box in index order with distinct uuids", () => {
    const { gpus, warning } = parse("h100-8x.txt");
    expect(warning).toBeUndefined();
    expect(gpus.map((gpu) => gpu.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(new Set(gpus.map((gpu) => gpu.uuid)).size).toBe(8);
    for (const gpu of gpus) expect(gpu).toMatchObject(H100);
    expect(gpus[7]?.uuid).toBe("GPU-8e81973e-0bec-47b0-b898-d190f9ebdacc");
  });

  it("parses a mixed 2x RTX 3090 + 2x RTX 4090 box", () => {
    const { gpus } = parse("mixed-2x-rtx3090-2x-rtx4090.txt");
    expect(
      gpus.map(({ index, name, vramMb, computeVersion, computeCores, tensorCores }) => ({ index, name, vramMb, computeVersion, computeCores, tensorCores })),
    ).toEqual([
      { index: 0, name: "NVIDIA GeForce RTX 3090", vramMb: 24576, computeVersion: "8.6", computeCores: 10496, tensorCores: 328 },
      { index: 1, name: "NVIDIA GeForce RTX 3090", vramMb: 24576, computeVersion: "8.6", computeCores: 10496, tensorCores: 328 },
      { index: 2, name: "NVIDIA GeForce RTX 4090", vramMb: 24564, computeVersion: "8.9", computeCores: 16384, tensorCores: 512 },
      { index: 3, name: "NVIDIA GeForce RTX 4090", vramMb: 24564, computeVersion: "8.9", computeCores: 16384, tensorCores: 512 },
    ]);
  });

  it("turns the driver-communication failure into no GPUs and a readable warning", () => {
    const { gpus, warning } = parse("driver-communication-error.txt");
    expect(gpus).toEqual([]);
    expect(warning).toMatch(/could not communicate with the NVIDIA driver/);
    expect(warning).toContain("NVIDIA-SMI has failed because it couldn't communicate");
  });

  it('turns "No devices were found" into no GPUs and a warning', () => {
    const { gpus, warning } = parse("no-devices.txt");
    expect(gpus).toEqual([]);
    expect(warning).toMatch(/found no NVIDIA GPU/);
  });

  it("turns a shell's command-not-found into no GPUs and a warning", () => {
    const result = parseNvidiaSmiOutput("bash: nvidia-smi: command not found\n");
    expect(result.gpus).toEqual([]);
    expect(result.warning).toMatch(/not installed/);
  });

  it("recognises an old driver's rejection of compute_cap, then parses its legacy rows", () => {
    expect(isUnknownFieldError(readFixture("nvidia-smi/legacy-driver-compute-cap-rejected.txt"))).toBe(true);
    const { gpus } = parseNvidiaSmiOutput(readFixture("nvidia-smi/legacy-driver-tesla-v100.txt"), LEGACY_GPU_QUERY_FIELDS);
    // The driver cannot say the compute capability; the model table fills it in.
    expect(gpus).toEqual([
      {
        index: 0,
        uuid: "GPU-18f135d2-5f55-4203-b018-50c5a38fd547",
        name: "Tesla V100-SXM2-32GB",
        vramMb: 32510,
        computeVersion: "7.0",
        driverVersion: "470.182.03",
        brand: "NVIDIA",
        computeCores: 5120,
        tensorCores: 640,
      },
    ]);
  });

  it("survives Windows line endings and trailing spaces", () => {
    const crlf = readFixture("nvidia-smi/mixed-2x-rtx3090-2x-rtx4090.txt").replace(/\n/g, "  \r\n");
    const { gpus, warning } = parseNvidiaSmiOutput(crlf);
    expect(warning).toBeUndefined();
    expect(gpus).toHaveLength(4);
    expect(gpus[3]).toMatchObject({ name: "NVIDIA GeForce RTX 4090", driverVersion: "550.107.02", vramMb: 24564 });
  });

  it("reads [N/A] and [Not Supported] as unknown instead of failing", () => {
    const output = "0, GPU-1f2e3d4c-0000-1111-2222-333344445555, NVIDIA L4, [N/A], [Not Supported], 535.161.08, 00000000:00:03.0\n";
    expect(parseNvidiaSmiOutput(output).gpus).toEqual([
      {
        index: 0,
        uuid: "GPU-1f2e3d4c-0000-1111-2222-333344445555",
        name: "NVIDIA L4",
        vramMb: 0,
        computeVersion: "8.9",
        driverVersion: "535.161.08",
        brand: "NVIDIA",
        computeCores: 7424,
        tensorCores: 232,
      },
    ]);
  });

  it("keeps the healthy GPUs when one has fallen off the bus, and says so", () => {
    const lines = readFixture("nvidia-smi/h100-8x.txt").split("\n");
    lines[3] = "Unable to determine the device handle for GPU0000:5D:00.0: Unknown Error";
    const { gpus, warning } = parseNvidiaSmiOutput(lines.join("\n"));
    expect(gpus.map((gpu) => gpu.index)).toEqual([0, 1, 2, 4, 5, 6, 7]);
    expect(warning).toContain("Unable to determine the device handle for GPU0000:5D:00.0");
  });

  it("gives a warning, not an exception, for empty or garbage output", () => {
    expect(parseNvidiaSmiOutput("")).toEqual({ gpus: [], warning: "nvidia-smi printed no GPU rows" });
    expect(parseNvidiaSmiOutput("\u0000\u0001garbage").gpus).toEqual([]);
  });
});
