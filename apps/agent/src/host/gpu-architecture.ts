// nvidia-smi reports a GPU's name and compute capability but not how many SMs
// (streaming multiprocessors) it has, so CUDA-core and tensor-core counts come
// from two tables:
//   - per-SM figures by compute capability (the architecture), and
//   - SM counts by model, matched on the name nvidia-smi prints.
// Numbers are from NVIDIA's architecture whitepapers (Volta V100, Turing,
// A100 / GA100, Ampere GA102, Ada Lovelace, H100 Hopper, Blackwell technical
// brief), the product datasheets of each listed card, and the "Compute
// Capabilities" throughput table of the CUDA C++ Programming Guide (FP32 results
// per clock per SM). Spot check: H100 SXM5 132 SMs x 128 = 16,896 CUDA cores,
// 132 x 4 = 528 tensor cores, as the H100 whitepaper states.
//
// A model missing from the SM table is NOT estimated: it gets 0 cores and 0
// tensor cores, because a wrong number shown to renters is worse than an absent
// one. Laptop / Max-Q parts share names with desktop cards but have fewer SMs,
// so they are deliberately treated as unknown.

export interface GpuArchitecture {
  architecture: string;
  fp32CoresPerSm: number;
  /** 0 before Volta: Pascal has no tensor cores */
  tensorCoresPerSm: number;
}

/** Keyed by CUDA compute capability "major.minor". */
export const ARCHITECTURES: Readonly<Record<string, GpuArchitecture>> = {
  "6.0": { architecture: "Pascal (GP100)", fp32CoresPerSm: 64, tensorCoresPerSm: 0 },
  "6.1": { architecture: "Pascal", fp32CoresPerSm: 128, tensorCoresPerSm: 0 },
  "7.0": { architecture: "Volta", fp32CoresPerSm: 64, tensorCoresPerSm: 8 },
  "7.5": { architecture: "Turing", fp32CoresPerSm: 64, tensorCoresPerSm: 8 },
  // GA100 (A100, A30) keeps Volta's 64 FP32 lanes per SM; GA10x doubled them.
  "8.0": { architecture: "Ampere (GA100)", fp32CoresPerSm: 64, tensorCoresPerSm: 4 },
  "8.6": { architecture: "Ampere (GA10x)", fp32CoresPerSm: 128, tensorCoresPerSm: 4 },
  "8.9": { architecture: "Ada Lovelace", fp32CoresPerSm: 128, tensorCoresPerSm: 4 },
  "9.0": { architecture: "Hopper", fp32CoresPerSm: 128, tensorCoresPerSm: 4 },
  "10.0": { architecture: "Blackwell (GB100)", fp32CoresPerSm: 128, tensorCoresPerSm: 4 },
  "10.3": { architecture: "Blackwell Ultra", fp32CoresPerSm: 128, tensorCoresPerSm: 4 },
  "12.0": { architecture: "Blackwell (GB20x)", fp32CoresPerSm: 128, tensorCoresPerSm: 4 },
};

export interface GpuModel {
  model: string;
  /** tested against the full nvidia-smi name; more specific patterns come first */
  pattern: RegExp;
  smCount: number;
  /** lets us fill in the compute capability on drivers older than 510, which cannot report it */
  computeVersion: string;
}

export const GPU_MODELS: readonly GpuModel[] = [
  // Datacenter. "H100 80GB HBM3" is the SXM5 part; the NVL has the full 132 SMs too.
  { model: "H100 PCIe", pattern: /\bH100\b.*\bPCIe\b/i, smCount: 114, computeVersion: "9.0" },
  { model: "H100 SXM / NVL", pattern: /\bH100\b/i, smCount: 132, computeVersion: "9.0" },
  { model: "H200", pattern: /\bH200\b/i, smCount: 132, computeVersion: "9.0" },
  { model: "GH200", pattern: /\bGH200\b/i, smCount: 132, computeVersion: "9.0" },
  { model: "B200", pattern: /\bB200\b/i, smCount: 148, computeVersion: "10.0" },
  { model: "A100", pattern: /\bA100\b/i, smCount: 108, computeVersion: "8.0" },
  { model: "A30", pattern: /\bA30\b/i, smCount: 56, computeVersion: "8.0" },
  { model: "A10G", pattern: /\bA10G\b/i, smCount: 80, computeVersion: "8.6" },
  { model: "A10", pattern: /\bA10\b/i, smCount: 72, computeVersion: "8.6" },
  { model: "A40", pattern: /\bA40\b/i, smCount: 84, computeVersion: "8.6" },
  { model: "L40S", pattern: /\bL40S\b/i, smCount: 142, computeVersion: "8.9" },
  { model: "L40", pattern: /\bL40\b/i, smCount: 142, computeVersion: "8.9" },
  { model: "L4", pattern: /\bL4\b/i, smCount: 58, computeVersion: "8.9" },
  { model: "V100", pattern: /\bV100\b/i, smCount: 80, computeVersion: "7.0" },
  { model: "T4", pattern: /\bT4\b/i, smCount: 40, computeVersion: "7.5" },
  // Workstation.
  { model: "RTX PRO 6000 Blackwell", pattern: /\bRTX PRO 6000 Blackwell\b/i, smCount: 188, computeVersion: "12.0" },
  { model: "RTX 6000 Ada", pattern: /\bRTX 6000 Ada\b/i, smCount: 142, computeVersion: "8.9" },
  { model: "RTX A6000", pattern: /\bRTX A6000\b/i, smCount: 84, computeVersion: "8.6" },
  { model: "RTX A5000", pattern: /\bRTX A5000\b/i, smCount: 64, computeVersion: "8.6" },
  { model: "RTX A4000", pattern: /\bRTX A4000\b/i, smCount: 48, computeVersion: "8.6" },
  // GeForce desktop.
  { model: "RTX 5090", pattern: /\bRTX 5090\b/i, smCount: 170, computeVersion: "12.0" },
  { model: "RTX 5080", pattern: /\bRTX 5080\b/i, smCount: 84, computeVersion: "12.0" },
  { model: "RTX 4090 D", pattern: /\bRTX 4090 D\b/i, smCount: 114, computeVersion: "8.9" },
  { model: "RTX 4090", pattern: /\bRTX 4090\b/i, smCount: 128, computeVersion: "8.9" },
  { model: "RTX 4080 SUPER", pattern: /\bRTX 4080 SUPER\b/i, smCount: 80, computeVersion: "8.9" },
  { model: "RTX 4080", pattern: /\bRTX 4080\b/i, smCount: 76, computeVersion: "8.9" },
  { model: "RTX 4070 Ti SUPER", pattern: /\bRTX 4070 Ti SUPER\b/i, smCount: 66, computeVersion: "8.9" },
  { model: "RTX 4070 Ti", pattern: /\bRTX 4070 Ti\b/i, smCount: 60, computeVersion: "8.9" },
  { model: "RTX 4070 SUPER", pattern: /\bRTX 4070 SUPER\b/i, smCount: 56, computeVersion: "8.9" },
  { model: "RTX 4070", pattern: /\bRTX 4070\b/i, smCount: 46, computeVersion: "8.9" },
  { model: "RTX 3090 Ti", pattern: /\bRTX 3090 Ti\b/i, smCount: 84, computeVersion: "8.6" },
  { model: "RTX 3090", pattern: /\bRTX 3090\b/i, smCount: 82, computeVersion: "8.6" },
  { model: "RTX 3080 Ti", pattern: /\bRTX 3080 Ti\b/i, smCount: 80, computeVersion: "8.6" },
  // The 12 GB RTX 3080 has 70 SMs but prints the same name; the common 10 GB part wins.
  { model: "RTX 3080", pattern: /\bRTX 3080\b/i, smCount: 68, computeVersion: "8.6" },
  { model: "RTX 3070", pattern: /\bRTX 3070\b(?! Ti)/i, smCount: 46, computeVersion: "8.6" },
  { model: "RTX 3060 Ti", pattern: /\bRTX 3060 Ti\b/i, smCount: 38, computeVersion: "8.6" },
  { model: "RTX 3060", pattern: /\bRTX 3060\b/i, smCount: 28, computeVersion: "8.6" },
  { model: "RTX 2080 Ti", pattern: /\bRTX 2080 Ti\b/i, smCount: 68, computeVersion: "7.5" },
];

const MOBILE_PART = /\b(Laptop|Mobile|Max-Q)\b/i;

export function findGpuModel(name: string): GpuModel | undefined {
  if (MOBILE_PART.test(name)) return undefined;
  return GPU_MODELS.find((entry) => entry.pattern.test(name));
}

export interface GpuCoreCounts {
  /** the driver's value when it gave one, else the model table's, else "" */
  computeVersion: string;
  computeCores: number;
  tensorCores: number;
}

/** `reportedComputeVersion` is "" when the driver could not say (drivers < 510). */
export function gpuCoreCounts(name: string, reportedComputeVersion: string): GpuCoreCounts {
  const model = findGpuModel(name);
  const computeVersion = reportedComputeVersion || model?.computeVersion || "";
  const architecture = ARCHITECTURES[computeVersion];
  if (!model || !architecture) return { computeVersion, computeCores: 0, tensorCores: 0 };
  return {
    computeVersion,
    computeCores: model.smCount * architecture.fp32CoresPerSm,
    tensorCores: model.smCount * architecture.tensorCoresPerSm,
  };
}
