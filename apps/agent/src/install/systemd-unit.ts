// The systemd unit and the environment file it reads, as pure text builders.
import type { ConfigKey, NodeKey } from "../config";
import type { AgentPaths } from "./paths";

export const UNIT_NAME = "cm-agent.service";
export const DEFAULT_UNIT_DIR = "/etc/systemd/system";
export const DEFAULT_ENV_FILE = "/etc/cm-agent/agent.env";
export const DEFAULT_STATE_DIR = "/var/lib/cm-agent";
/** sysexits' EX_CONFIG: the agent exits with it when restarting cannot help (bad token, node taken over). */
export const EXIT_CONFIG = 78;

/** One ExecStart word: % and $ are systemd specifiers; quotes keep spaces. */
export function systemdWord(word: string): string {
  const escaped = word.replace(/%/g, "%%").replace(/\$/g, "$$$$");
  return /[\s"'\\;]/.test(escaped) ? `"${escaped.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"` : escaped;
}

export function renderUnit(paths: AgentPaths, envFile: string): string {
  const exec = [paths.node, ...(paths.tsxLoader ? ["--import", paths.tsxLoader] : []), paths.entry, "run"].map(systemdWord).join(" ");
  return `# Written by \`npm run agent -- install\`; run it again to change this file.
[Unit]
Description=Compute marketplace agent (runs tenants' containers on this machine)
Documentation=file://${paths.readme.replace(/%/g, "%%")}
# The agent drives Docker and can do nothing without it. Requires= rather than
# BindsTo=: when dockerd crashes the agent stays up, keeps its control-plane
# connection and waits for Docker, while an explicit stop or restart of Docker
# stops or restarts the agent with it. Tenants' containers never depend on the agent.
Requires=docker.service
After=docker.service network-online.target
Wants=network-online.target

[Service]
Type=simple
EnvironmentFile=${envFile}
WorkingDirectory=${systemdWord(paths.repoRoot)}
ExecStart=${exec}
Restart=always
RestartSec=5
# The agent exits ${EXIT_CONFIG} when a restart cannot help: a rejected token, or another
# machine took over the node with the same token. Fix the cause, then restart it.
RestartPreventExitStatus=${EXIT_CONFIG}
# SIGTERM makes the agent close its connection and exit; containers keep running.
KillSignal=SIGTERM
KillMode=mixed
TimeoutStopSec=30
NoNewPrivileges=true
PrivateTmp=true
ProtectSystem=full
# /var/lib/cm-agent, for AGENT_STATE_DIR (status.json, read by \`doctor\`).
StateDirectory=cm-agent

[Install]
WantedBy=multi-user.target
`;
}

/** The control plane and the token, then any other setting the agent or Node reads, in the order given. */
export type EnvFileValues = { CONTROL_PLANE_URL: string; AGENT_TOKEN: string } & Partial<Record<ConfigKey | NodeKey, string>>;

/** KEY=VALUE lines as systemd's EnvironmentFile reads them (and the agent's --config). */
export function renderEnvFile(values: EnvFileValues): string {
  const lines = ["# cm-agent configuration, read by cm-agent.service (EnvironmentFile=).", "# Mode 0600: it holds this node's token."];
  for (const [key, value] of Object.entries(values)) {
    if (value === undefined || value === "") continue;
    if (/[\r\n]/.test(value)) throw new Error(`${key} must be on one line`);
    lines.push(`${key}=${/^[A-Za-z0-9_.:/@%+=,-]*$/.test(value) ? value : `"${value.replace(/(["\\$`])/g, "\\$1")}"`}`);
  }
  return `${lines.join("\n")}\n`;
}
