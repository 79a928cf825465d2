// Translation of nvidia-smi's CSV query output into GpuInfo. Pure: the probe runs
// the command, this file only reads text, and never throws on odd input.
import { gpuCoreCounts } from "./gpu-architecture";
import type { GpuInfo, GpuProbeResult } from "./types";

/** The columns we ask for, in order. compute_cap only exists on drivers >= 510. */
export const GPU_QUERY_FIELDS = ["index", "uuid", "name", "memory.total", "compute_cap", "driver_version", "pci.bus_id"] as const;
/** Fallback for drivers < 510, which reject the whole query when compute_cap is named. */
export const LEGACY_GPU_QUERY_FIELDS = GPU_QUERY_FIELDS.filter((field) => field !== "compute_cap");

export type GpuQueryField = (typeof GPU_QUERY_FIELDS)[number];

export function nvidiaSmiArgs(fields: readonly GpuQueryField[] = GPU_QUERY_FIELDS): string[] {
  return [`--query-gpu=${fields.join(",")}`, "--format=csv,noheader,nounits"];
}

/** Old drivers answer `Field "compute_cap" is not a valid field to query.` */
export function isUnknownFieldError(output: string): boolean {
  return /is not a valid field to query/i.test(output);
}

// Whole-output failures nvidia-smi (or the shell) prints instead of rows.
const FAILURES: readonly { pattern: RegExp; warning: string }[] = [
  {
    pattern: /couldn't communicate with the NVIDIA driver/i,
    warning: "nvidia-smi could not communicate with the NVIDIA driver: the driver is not installed or not loaded",
  },
  { pattern: /No devices were found/i, warning: "nvidia-smi found no NVIDIA GPU on this machine" },
  {
    pattern: /Failed to initialize NVML/i,
    warning: "nvidia-smi failed to initialize NVML (often a driver/library version mismatch after a driver upgrade; reboot)",
  },
  {
    pattern: /(command not found|not recognized as an internal or external command|ENOENT)/i,
    warning: "nvidia-smi is not installed (no NVIDIA driver on this machine)",
  },
];

/** A readable warning when `output` is one of nvidia-smi's failure messages, else undefined. */
export function describeNvidiaSmiFailure(output: string): string | undefined {
  const failure = FAILURES.find((candidate) => candidate.pattern.test(output));
  if (!failure) return undefined;
  const firstLine = output.trim().split(/\r?\n/)[0] ?? "";
  return `${failure.warning} (nvidia-smi said: "${firstLine}")`;
}

// "[N/A]", "[Not Supported]", "[Unknown Error]", "[Insufficient Permissions]"...
function isPlaceholder(value: string): boolean {
  return /^\[.*\]$/.test(value) || value === "N/A" || value === "";
}

function text(value: string | undefined): string {
  return value === undefined || isPlaceholder(value) ? "" : value;
}

function integer(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d+$/.test(value)) return undefined;
  return Number(value);
}

function splitColumns(line: string, expected: number): string[] | undefined {
  const columns = line.split(",").map((column) => column.trim());
  if (columns.length < expected) return undefined;
  if (columns.length === expected) return columns;
  // Only the name is free text; if it ever carries a comma, glue it back together.
  const nameAt = 2;
  const extra = columns.length - expected;
  const name = columns.slice(nameAt, nameAt + extra + 1).join(", ");
  return [...columns.slice(0, nameAt), name, ...columns.slice(nameAt + extra + 1)];
}

function parseRow(line: string, fields: readonly GpuQueryField[]): GpuInfo | undefined {
  const columns = splitColumns(line, fields.length);
  if (!columns) return undefined;
  const value = (field: GpuQueryField): string | undefined => {
    const at = fields.indexOf(field);
    return at < 0 ? undefined : columns[at];
  };
  const index = integer(value("index"));
  if (index === undefined) return undefined;
  const name = text(value("name"));
  const reportedComputeVersion = value("compute_cap") ?? "";
  const cores = gpuCoreCounts(name, /^\d+\.\d+$/.test(reportedComputeVersion) ? reportedComputeVersion : "");
  return {
    index,
    uuid: text(value("uuid")),
    name,
    vramMb: integer(value("memory.total")) ?? 0,
    computeVersion: cores.computeVersion,
    driverVersion: text(value("driver_version")),
    brand: "NVIDIA",
    computeCores: cores.computeCores,
    tensorCores: cores.tensorCores,
  };
}

/**
 * Parses `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits` output.
 * Rows that do not parse (e.g. "Unable to determine the device handle for GPU..."
 * when a card has fallen off the bus) are skipped and named in the warning, so a
 * box with one dead GPU still offers the healthy ones.
 */
export function parseNvidiaSmiOutput(output: string, fields: readonly GpuQueryField[] = GPU_QUERY_FIELDS): GpuProbeResult {
  const failure = describeNvidiaSmiFailure(output);
  if (failure) return { gpus: [], warning: failure };

  const gpus: GpuInfo[] = [];
  const skipped: string[] = [];
  for (const rawLine of output.split(/\r?\n/)) {
    const line = rawLine.trim();
    if (line === "") continue;
    const gpu = parseRow(line, fields);
    if (gpu) gpus.push(gpu);
    else skipped.push(line);
  }
  gpus.sort((a, b) => a.index - b.index);

  if (skipped.length > 0) {
    return { gpus, warning: `nvidia-smi printed ${skipped.length} line(s) that are not GPU rows: ${skipped.join(" | ")}` };
  }
  if (gpus.length === 0) return { gpus, warning: "nvidia-smi printed no GPU rows" };
  return { gpus };
}
