import { describe, expect, it } from "vitest";
import { findGpuModel, gpuCoreCounts } from "../../src/host/gpu-architecture";

describe("gpuCoreCounts", () => {
  // Totals as published in NVIDIA's whitepapers and datasheets.
  it.each([
    ["NVIDIA H100 80GB HBM3", "9.0", 16896, 528],
    ["NVIDIA H100 PCIe", "9.0", 14592, 456],
    ["NVIDIA H200", "9.0", 16896, 528],
    ["NVIDIA A100-SXM4-80GB", "8.0", 6912, 432],
    ["NVIDIA A100 80GB PCIe", "8.0", 6912, 432],
    ["NVIDIA A10", "8.6", 9216, 288],
    ["NVIDIA RTX A6000", "8.6", 10752, 336],
    ["NVIDIA GeForce RTX 3090", "8.6", 10496, 328],
    ["NVIDIA GeForce RTX 3080", "8.6", 8704, 272],
    ["NVIDIA GeForce RTX 4090", "8.9", 16384, 512],
    ["NVIDIA GeForce RTX 4080", "8.9", 9728, 304],
    ["NVIDIA L40S", "8.9", 18176, 568],
    ["NVIDIA L4", "8.9", 7424, 232],
    ["NVIDIA RTX 6000 Ada Generation", "8.9", 18176, 568],
    ["Tesla T4", "7.5", 2560, 320],
    ["Tesla V100-SXM2-16GB", "7.0", 5120, 640],
    ["NVIDIA B200", "10.0", 18944, 592],
    ["NVIDIA GeForce RTX 5090", "12.0", 21760, 680],
  ])("%s (%s) has %i CUDA cores and %i tensor cores", (name, computeVersion, computeCores, tensorCores) => {
    expect(gpuCoreCounts(name, computeVersion)).toEqual({ computeVersion, computeCores, tensorCores });
  });

  it("does not confuse names that contain each other", () => {
    expect(findGpuModel("NVIDIA A100-PCIE-40GB")?.model).toBe("A100");
    expect(findGpuModel("NVIDIA A10G")?.model).toBe("A10G");
    expect(findGpuModel("NVIDIA L40")?.model).toBe("L40");
    expect(findGpuModel("NVIDIA GH200 480GB")?.model).toBe("GH200");
    expect(findGpuModel("NVIDIA GeForce RTX 4090 D")?.model).toBe("RTX 4090 D");
    expect(findGpuModel("NVIDIA GeForce RTX 3070 Ti")).toBeUndefined();
  });

  it("reports 0 cores for a model it does not know rather than guessing", () => {
    expect(gpuCoreCounts("NVIDIA GeForce GTX 1080 Ti", "6.1")).toEqual({ computeVersion: "6.1", computeCores: 0, tensorCores: 0 });
    // Laptop parts carry desktop names but fewer SMs.
    expect(gpuCoreCounts("NVIDIA GeForce RTX 4090 Laptop GPU", "8.9")).toEqual({ computeVersion: "8.9", computeCores: 0, tensorCores: 0 });
  });

  it("fills a missing compute capability from the model table, or leaves it empty", () => {
    expect(gpuCoreCounts("NVIDIA A100-SXM4-40GB", "").computeVersion).toBe("8.0");
    expect(gpuCoreCounts("Some Future GPU", "")).toEqual({ computeVersion: "", computeCores: 0, tensorCores: 0 });
  });
});
