import type { CreateDeploymentRequest } from "@cm/sdk";
import type { Region } from "./lists";

/** One environment variable row of the deploy form. */
export interface EnvRow {
  key: number;
  name: string;
  value: string;
}

/** What the deploy form holds, as typed: text until it becomes the API's body. */
export interface DeployForm {
  source: "template" | "image";
  templateId: string;
  image: string;
  registryCredentialId: string;
  placement: "node" | "cheapest";
  nodeId: string;
  region: string;
  maxHourlyRate: string;
  gpuModel: string;
  minGpuVram: string;
  name: string;
  gpuCount: string;
  cpuCores: string;
  memoryMb: string;
  command: string;
  env: EnvRow[];
  ports: string;
  tcpPorts: string;
}

/**
 * The command as an argv, split as a shell would split words (quotes keep spaces, a backslash
 * escapes one character) but run by no shell: `sh -c "echo hi"` is three items. Undefined for
 * an unclosed quote.
 */
export function splitCommand(text: string): string[] | undefined {
  const argv: string[] = [];
  let word = "";
  let inWord = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === "\\" && quote === '"' && i + 1 < text.length) word += text[++i];
      else word += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      inWord = true;
    } else if (c === "\\" && i + 1 < text.length) {
      word += text[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) argv.push(word);
      word = "";
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) return undefined;
  if (inWord) argv.push(word);
  return argv;
}

function portList(text: string, label: string): number[] | string {
  const items = text.split(/[\s,]+/).filter(Boolean);
  const ports: number[] = [];
  for (const item of items) {
    const n = Number(item);
    if (!/^\d+$/.test(item) || n < 1 || n > 65535) return `${label}: ${JSON.stringify(item)} is not a port (1 to 65535).`;
    ports.push(n);
  }
  return ports;
}

function optionalNumber(text: string, label: string, integer: boolean): number | undefined | string {
  if (text.trim() === "") return undefined;
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0 || (integer && !Number.isInteger(n))) return `${label} must be ${integer ? "a whole number" : "a number"}, 0 or more.`;
  return n;
}

/**
 * The POST /deployments body the form says, or what to fix first (a sentence): only what the
 * form itself can tell; the API judges the rest (an estimate shows its answer before submit).
 */
export function deployBody(f: DeployForm): { body: CreateDeploymentRequest } | { problem: string } {
  const body: CreateDeploymentRequest = {};
  if (f.source === "template") {
    if (!f.templateId) return { problem: "Pick a template." };
    body.templateId = f.templateId;
  } else {
    if (!f.image.trim()) return { problem: "Give the container image to run, such as ubuntu:22.04." };
    body.customImage = f.image.trim();
    if (f.registryCredentialId) body.registryCredentialId = f.registryCredentialId;
  }
  if (f.placement === "node") {
    if (!f.nodeId) return { problem: "Pick a node, or let the cheapest node that fits be chosen." };
    body.nodeId = f.nodeId;
  } else {
    if (f.region) body.region = f.region as Region;
    if (f.gpuModel.trim()) body.gpuModel = f.gpuModel.trim();
    const rate = optionalNumber(f.maxHourlyRate, "Maximum price", false);
    if (typeof rate === "string") return { problem: rate };
    if (rate !== undefined) body.maxHourlyRate = rate;
    const vram = optionalNumber(f.minGpuVram, "Minimum GPU memory", true);
    if (typeof vram === "string") return { problem: vram };
    if (vram !== undefined) body.minGpuVram = vram;
  }
  if (f.name.trim()) body.name = f.name.trim();
  const numbers = [
    ["gpuCount", f.gpuCount, "GPU count", true],
    ["cpuCores", f.cpuCores, "CPU cores", false],
    ["memoryMb", f.memoryMb, "Memory (MB)", true],
  ] as const;
  for (const [key, text, label, integer] of numbers) {
    const n = optionalNumber(text, label, integer);
    if (typeof n === "string") return { problem: n };
    if (n !== undefined) body[key] = n;
  }
  if (f.command.trim()) {
    const argv = splitCommand(f.command);
    if (!argv) return { problem: "The command has a quote that is not closed." };
    body.command = argv;
  }
  const env: Record<string, string> = {};
  for (const row of f.env) {
    const name = row.name.trim();
    if (!name && !row.value) continue;
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
      return { problem: `Environment variable ${JSON.stringify(name)}: a name is letters, digits and _, not starting with a digit.` };
    if (name in env) return { problem: `Environment variable ${name} is given twice.` };
    env[name] = row.value;
  }
  if (Object.keys(env).length) body.env = env;
  const ports = portList(f.ports, "HTTP ports");
  if (typeof ports === "string") return { problem: ports };
  if (ports.length) body.ports = ports;
  const tcpPorts = portList(f.tcpPorts, "TCP ports");
  if (typeof tcpPorts === "string") return { problem: tcpPorts };
  if (tcpPorts.length) body.tcpPorts = tcpPorts;
  return { body };
}
