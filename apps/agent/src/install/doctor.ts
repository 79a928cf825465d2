// `npm run agent -- doctor`: one ✓/✗ line per thing the agent needs, each with
// a fix. Exits non-zero when a required check fails; a CPU-only machine is fine.
import type { AgentConfig, NodeSettings } from "../config";
import { NODE_KEYS } from "../config";
import type { HostProbe } from "../host/probe";
import type { EngineClient } from "../runtime/container-runtime";
import { isSandboxArch } from "../runtime/sandbox-program";
import type { EngineInfo } from "../runtime/types";
import type { AgentStatus } from "../state-file";
import { checkToken } from "./token-check";

export type CheckStatus = "ok" | "warn" | "fail" | "skip";
export interface CheckResult {
  status: CheckStatus;
  title: string;
  detail: string;
  fix?: string;
}

export interface DoctorDeps {
  /** the parsed config, or the problems that kept it from parsing */
  config: { ok: true; value: AgentConfig } | { ok: false; problems: string[] };
  /** what is odd but not wrong in it: an unknown key in the file, a value the environment overrides */
  configWarnings?: string[];
  /** Node's settings in effect (nodeSettingsCheck), when any is set */
  nodeSettings?: CheckResult;
  dockerSocket: string;
  engine: EngineClient;
  hostProbe: Pick<HostProbe, "gpus">;
  fetch: typeof fetch;
  /** the egress policy on this machine's firewall (egress/iptables.ts): what is wrong with it, empty when in place */
  egress?: { check(): Promise<string[]> };
  /** what a running agent wrote to AGENT_STATE_DIR/status.json, and whether its process lives */
  agentStatus?: { status: AgentStatus; alive: boolean };
  timeoutMs?: number;
  print(line: string): void;
}

const SYMBOL: Record<CheckStatus, string> = { ok: "✓", warn: "!", fail: "✗", skip: "-" };

export async function runDoctor(deps: DoctorDeps): Promise<number> {
  const results: CheckResult[] = [];
  const report = (result: CheckResult) => {
    results.push(result);
    deps.print(`${SYMBOL[result.status]} ${result.title}: ${result.detail}`);
    if (result.fix && result.status !== "ok") deps.print(`    fix: ${result.fix}`);
  };
  const timeoutMs = deps.timeoutMs ?? 10_000;

  const config = deps.config.ok ? deps.config.value : undefined;
  if (deps.config.ok) report({ status: "ok", title: "Configuration", detail: `control plane ${deps.config.value.httpUrl}, socket ${deps.config.value.wsUrl}` });
  else
    report({
      status: "fail",
      title: "Configuration",
      detail: deps.config.problems.join("; "),
      fix: "set CONTROL_PLANE_URL and AGENT_TOKEN (or pass --control-plane and --token-file PATH, or --config /etc/cm-agent/agent.env)",
    });

  for (const warning of deps.configWarnings ?? [])
    report({ status: "warn", title: "Configuration", detail: warning, fix: "correct or remove it, unless it is meant for something else" });
  if (deps.nodeSettings) report(deps.nodeSettings);

  let engine: EngineInfo | undefined;
  try {
    engine = await deps.engine.engineInfo();
    if (isSandboxArch(engine.architecture))
      report({ status: "ok", title: "Docker", detail: `engine ${engine.version} (${engine.architecture}) at ${deps.dockerSocket}` });
    else
      report({
        status: "fail",
        title: "Docker",
        detail: `engine ${engine.version} runs on ${engine.architecture || "an unknown machine"}: the agent's network sandboxes exist for x86_64 and aarch64 only`,
        fix: "run the agent on an x86_64 or aarch64 machine",
      });
  } catch (error) {
    report({
      status: "fail",
      title: "Docker",
      detail: `cannot reach the engine at ${deps.dockerSocket}: ${(error as Error).message}`,
      fix: "start Docker (systemctl start docker), run the agent as root or in the docker group, or point DOCKER_SOCKET at the engine's socket",
    });
  }

  const gpus = await deps.hostProbe.gpus();
  if (gpus.gpus.length > 0) {
    const names = gpus.gpus.map((gpu) => `#${gpu.index} ${gpu.name} (${Math.round(gpu.vramMb / 1024)} GB)`).join(", ");
    report({
      status: gpus.warning ? "warn" : "ok",
      title: "NVIDIA GPUs",
      detail: `${gpus.gpus.length} found: ${names}${gpus.warning ? `; ${gpus.warning}` : ""}`,
    });
  } else {
    report({
      status: "warn",
      title: "NVIDIA GPUs",
      detail: `none: ${gpus.warning ?? gpus.note ?? "nvidia-smi lists no GPU"}. This node will take CPU-only deployments`,
      fix: "if this machine has NVIDIA GPUs, install the NVIDIA driver so that nvidia-smi lists them",
    });
  }

  if (gpus.gpus.length === 0) report({ status: "skip", title: "NVIDIA container runtime", detail: "not needed without GPUs" });
  else if (!engine) report({ status: "skip", title: "NVIDIA container runtime", detail: "cannot tell while Docker is unreachable" });
  else if (engine.runtimes.includes("nvidia"))
    report({ status: "ok", title: "NVIDIA container runtime", detail: `registered with Docker (runtimes: ${engine.runtimes.join(", ")})` });
  else
    report({
      status: "fail",
      title: "NVIDIA container runtime",
      detail: `Docker knows no "nvidia" runtime (runtimes: ${engine.runtimes.join(", ") || "none"}), so containers cannot use the GPUs`,
      fix: "install nvidia-container-toolkit, then: nvidia-ctk runtime configure --runtime=docker && systemctl restart docker",
    });

  if (deps.egress) report(await egressCheck(deps.egress, config, deps.agentStatus?.alive ?? false));

  if (!config) {
    report({ status: "skip", title: "Control plane", detail: "no valid configuration" });
    report({ status: "skip", title: "Token", detail: "no valid configuration" });
  } else {
    const healthy = await checkHealth(deps, config.httpUrl, timeoutMs);
    report(healthy);
    if (healthy.status !== "ok") report({ status: "skip", title: "Token", detail: "the control plane does not answer" });
    else {
      // A lookup, not a connection: the running agent keeps its session, and the node's status is left as it is.
      const token = await checkToken(deps.fetch, config.httpUrl, config.token, timeoutMs);
      if (token.ok) report({ status: "ok", title: "Token", detail: `accepted: this machine is node ${token.nodeId} (${token.name})` });
      else
        report({
          status: "fail",
          title: "Token",
          detail: token.reason,
          fix: token.rejected
            ? "copy the node's token again from the control plane (or register the node again) into AGENT_TOKEN"
            : "check that CONTROL_PLANE_URL points at the control plane",
        });
    }
  }

  if (deps.agentStatus) report(agentServiceCheck(deps.agentStatus.status, deps.agentStatus.alive));

  const failed = results.filter((r) => r.status === "fail").length;
  deps.print(failed === 0 ? "All required checks passed." : `${failed} required check${failed === 1 ? "" : "s"} failed.`);
  return failed === 0 ? 0 : 1;
}

async function egressCheck(egress: NonNullable<DoctorDeps["egress"]>, config: AgentConfig | undefined, agentRuns: boolean): Promise<CheckResult> {
  const title = "Egress policy";
  if (config?.egressPolicy === "off") {
    return {
      status: "warn",
      title,
      detail: "off (AGENT_EGRESS_POLICY=off): tenants' containers can reach this machine, its network and any cloud metadata service, and tenants are told so",
      fix: "remove AGENT_EGRESS_POLICY=off, and open only what tenants need with AGENT_EGRESS_ALLOW",
    };
  }
  const problems = await egress.check();
  const allowed =
    config && config.egressAllow.length > 0
      ? `; also allowed: ${config.egressAllow.length} AGENT_EGRESS_ALLOW entr${config.egressAllow.length === 1 ? "y" : "ies"}`
      : "";
  if (problems.length === 0) return { status: "ok", title, detail: `in place: tenants' containers reach the internet and DNS only${allowed}` };
  const detail = problems.join("; ");
  if (/permission denied|must be root/i.test(detail))
    return { status: "skip", title, detail: "reading the firewall needs root: run doctor with sudo to check it" };
  const fix =
    "the agent installs it at start and puts it back every 30 s: see journalctl -u cm-agent for why it cannot (iptables installed? Docker running with its iptables option on?)";
  if (agentRuns) return { status: "fail", title, detail: `missing while the agent runs, so it starts no deployment: ${detail}`, fix };
  return { status: "warn", title, detail: `not installed (the agent installs it when it starts): ${detail}`, fix };
}

function agentServiceCheck(status: AgentStatus, alive: boolean): CheckResult {
  const since = new Date(status.since).toISOString();
  const title = "Agent service";
  if (!alive)
    return { status: "skip", title, detail: `not running (pid ${status.pid} was ${status.state} at ${since}${status.failure ? `: ${status.failure}` : ""})` };
  if (status.failure) return { status: "fail", title, detail: `stopped retrying: ${status.failure}`, fix: "fix the cause, then: systemctl restart cm-agent" };
  if (status.state === "ready") return { status: "ok", title, detail: `connected as node ${status.nodeId ?? "?"} since ${since} (pid ${status.pid})` };
  return { status: "warn", title, detail: `${status.state} since ${since} (pid ${status.pid}); see journalctl -u cm-agent` };
}

async function checkHealth(deps: DoctorDeps, httpUrl: string, timeoutMs: number): Promise<CheckResult> {
  const url = `${httpUrl}/health`;
  const fix = "check CONTROL_PLANE_URL, DNS and that this machine may open outbound connections to it";
  try {
    const response = await deps.fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    if (response.ok) return { status: "ok", title: "Control plane", detail: `GET ${url} answered ${response.status}` };
    return { status: "fail", title: "Control plane", detail: `GET ${url} answered ${response.status}`, fix };
  } catch (error) {
    const cause = (error as { cause?: { message?: string } }).cause?.message;
    return { status: "fail", title: "Control plane", detail: `GET ${url} failed: ${cause ?? (error as Error).message}`, fix };
  }
}

/**
 * Node's own settings as this process has them (the environment's, the config file's once
 * relaunched with them): what the service runs with. A CA file Node cannot read it only warns
 * about on stderr, and every TLS connection to the control plane then fails: a failure here.
 */
export function nodeSettingsCheck(
  env: Record<string, string | undefined>,
  notApplied: NodeSettings,
  readFile: (path: string) => string,
): CheckResult | undefined {
  const title = "Node settings";
  const set = NODE_KEYS.filter((key) => env[key]);
  const missing = Object.keys(notApplied);
  if (set.length === 0 && missing.length === 0) return undefined;
  if (missing.length > 0)
    return {
      status: "warn",
      title,
      detail: `${missing.join(", ")} from the config file not in effect in this check: Node reads them as it starts`,
      fix: "run doctor as cm-agent doctor --config FILE, which starts itself again with them",
    };
  const shown: string[] = [];
  for (const key of set) {
    const value = env[key]!;
    if (key !== "NODE_EXTRA_CA_CERTS") {
      shown.push(`${key}=${value}`);
      continue;
    }
    const fix = "point NODE_EXTRA_CA_CERTS at a PEM file holding the CA certificate that signed the control plane's";
    let pem: string;
    try {
      pem = readFile(value);
    } catch (error) {
      return { status: "fail", title, detail: `NODE_EXTRA_CA_CERTS=${value} cannot be read: ${(error as Error).message}`, fix };
    }
    const certificates = pem.match(/-----BEGIN CERTIFICATE-----/g)?.length ?? 0;
    if (certificates === 0) return { status: "fail", title, detail: `NODE_EXTRA_CA_CERTS=${value} holds no PEM certificate`, fix };
    shown.push(`${key}=${value} (${certificates} certificate${certificates === 1 ? "" : "s"}, trusted besides Node's own CAs)`);
  }
  return { status: "ok", title, detail: shown.join(", ") };
}
