// The agent's view of the machine it runs on. The only place (with its helpers
// in host/) that touches systeminformation or runs nvidia-smi.
import { execFile } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import * as si from "systeminformation";
import type { GpuQueryField } from "./nvidia-smi";
import { describeNvidiaSmiFailure, GPU_QUERY_FIELDS, isUnknownFieldError, LEGACY_GPU_QUERY_FIELDS, nvidiaSmiArgs, parseNvidiaSmiOutput } from "./nvidia-smi";
import { toNodeSpecs } from "./system-specs";
import type { GpuProbeResult, NodeSpecs } from "./types";

export interface HostProbe {
  specs(): Promise<NodeSpecs>;
  /** Never rejects: a machine without a working NVIDIA driver has no GPUs and a warning. */
  gpus(): Promise<GpuProbeResult>;
}

export interface DockerEngineFacts {
  version: string;
  /** Docker's data root (`docker info` DockerRootDir) */
  dataRoot?: string;
}

export interface SystemHostProbeOptions {
  /**
   * How to learn the Docker engine's version and data root. The probe does not
   * talk to Docker (runtime/ owns that), so the caller passes e.g.
   * `() => runtime.engineInfo()`. When absent or failing, containerVersion is
   * "unknown" and the data root is assumed to be /var/lib/docker.
   */
  dockerEngine?: () => Promise<DockerEngineFacts>;
  nvidiaSmiPath?: string;
  nvidiaSmiTimeoutMs?: number;
  /** Where the PCI devices are listed (Linux's sysfs), to tell a machine with no NVIDIA GPU from one whose driver is missing. */
  pciDevicesDir?: string;
}

export const DEFAULT_DOCKER_DATA_ROOT = "/var/lib/docker";
export const DEFAULT_NVIDIA_SMI_TIMEOUT_MS = 10_000;
export const DEFAULT_PCI_DEVICES_DIR = "/sys/bus/pci/devices";
/** The PCI vendor id of NVIDIA, as sysfs writes it. */
const NVIDIA_PCI_VENDOR = "0x10de";

interface CommandOutcome {
  output: string;
  /** "ENOENT", "TIMEOUT", an exit code as text, or undefined on success */
  failure?: string;
}

function runCommand(file: string, args: string[], timeoutMs: number): Promise<CommandOutcome> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: timeoutMs, windowsHide: true, encoding: "utf8" }, (error, stdout, stderr) => {
      const output = `${stdout}${stderr}`;
      if (!error) return resolve({ output });
      const { code, killed } = error as NodeJS.ErrnoException & { killed?: boolean };
      if (code === "ENOENT") return resolve({ output, failure: "ENOENT" });
      if (killed) return resolve({ output, failure: "TIMEOUT" });
      resolve({ output, failure: `exit code ${String(code ?? error.message)}` });
    });
  });
}

export class SystemHostProbe implements HostProbe {
  private readonly nvidiaSmiPath: string;
  private readonly nvidiaSmiTimeoutMs: number;

  constructor(private readonly options: SystemHostProbeOptions = {}) {
    this.nvidiaSmiPath = options.nvidiaSmiPath ?? "nvidia-smi";
    this.nvidiaSmiTimeoutMs = options.nvidiaSmiTimeoutMs ?? DEFAULT_NVIDIA_SMI_TIMEOUT_MS;
  }

  async specs(): Promise<NodeSpecs> {
    const [cpu, mem, osInfo, fsSize, diskLayout, blockDevices, networkInterfaces, defaultInterface, engine] = await Promise.all([
      si.cpu(),
      si.mem(),
      si.osInfo(),
      si.fsSize(),
      si.diskLayout(),
      si.blockDevices(),
      si.networkInterfaces(),
      si.networkInterfaceDefault(),
      this.engineFacts(),
    ]);
    return toNodeSpecs(
      { cpu, mem, osInfo, fsSize, diskLayout, blockDevices, networkInterfaces: [networkInterfaces].flat(), defaultInterface },
      { containerVersion: engine.version, dockerDataRoot: engine.dataRoot ?? DEFAULT_DOCKER_DATA_ROOT },
    );
  }

  async gpus(): Promise<GpuProbeResult> {
    try {
      const current = await this.queryGpus(GPU_QUERY_FIELDS);
      // Drivers < 510 reject the whole query because of compute_cap; ask again without it.
      if (current.unknownField) return (await this.queryGpus(LEGACY_GPU_QUERY_FIELDS)).result;
      return current.result;
    } catch (error) {
      return { gpus: [], warning: `probing GPUs failed unexpectedly: ${(error as Error).message}` };
    }
  }

  /** Whether sysfs lists a device of NVIDIA's; undefined where it cannot tell (no sysfs: not Linux, or hidden). */
  private async hasNvidiaDevice(): Promise<boolean | undefined> {
    const dir = this.options.pciDevicesDir ?? DEFAULT_PCI_DEVICES_DIR;
    let devices: string[];
    try {
      devices = await readdir(dir);
    } catch {
      return undefined;
    }
    const vendors = await Promise.all(devices.map((d) => readFile(join(dir, d, "vendor"), "utf8").catch(() => "")));
    return vendors.some((v) => v.trim().toLowerCase() === NVIDIA_PCI_VENDOR);
  }

  private async queryGpus(fields: readonly GpuQueryField[]): Promise<{ result: GpuProbeResult; unknownField: boolean }> {
    const { output, failure } = await runCommand(this.nvidiaSmiPath, nvidiaSmiArgs(fields), this.nvidiaSmiTimeoutMs);
    if (failure === "ENOENT") {
      // No driver on a machine with no NVIDIA device is how a CPU-only node is, not something to fix: npm start
      // on a laptop warned of it twice (the agent and the control plane) with nothing its user could do.
      if ((await this.hasNvidiaDevice()) === false) return { result: { gpus: [], note: "no NVIDIA device on this machine's PCI bus" }, unknownField: false };
      return { result: { gpus: [], warning: `${this.nvidiaSmiPath} was not found: no NVIDIA driver is installed on this machine` }, unknownField: false };
    }
    if (failure === "TIMEOUT") {
      const seconds = this.nvidiaSmiTimeoutMs / 1000;
      return { result: { gpus: [], warning: `nvidia-smi did not answer within ${seconds} s; the driver may be hung` }, unknownField: false };
    }
    if (isUnknownFieldError(output)) return { result: { gpus: [] }, unknownField: true };
    const result = parseNvidiaSmiOutput(output, fields);
    if (failure && result.gpus.length === 0 && !describeNvidiaSmiFailure(output)) {
      result.warning = `nvidia-smi failed (${failure}): ${output.trim() || "it printed nothing"}`;
    }
    return { result, unknownField: false };
  }

  private async engineFacts(): Promise<DockerEngineFacts> {
    if (!this.options.dockerEngine) return { version: "unknown" };
    try {
      return await this.options.dockerEngine();
    } catch {
      return { version: "unknown" };
    }
  }
}
