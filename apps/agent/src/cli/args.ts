// The command line: `[run|install|doctor|help|version] [--flag value | --flag=value | --switch]`.
import type { RawConfig } from "../config";

export const COMMANDS = ["run", "install", "uninstall", "doctor", "help", "version"] as const;
export type Command = (typeof COMMANDS)[number];

/** Flags that set a config key, shared by every command. */
const CONFIG_FLAGS = {
  "control-plane": "CONTROL_PLANE_URL",
  token: "AGENT_TOKEN",
  "token-file": "AGENT_TOKEN_FILE",
  "docker-socket": "DOCKER_SOCKET",
  "state-dir": "AGENT_STATE_DIR",
  "log-level": "LOG_LEVEL",
} as const satisfies Record<string, keyof RawConfig>;

const VALUE_FLAGS: Record<Command, readonly string[]> = {
  run: ["config"],
  install: ["config", "unit-dir", "env-file", "env-path"],
  uninstall: ["config", "unit-dir", "env-file", "env-path"],
  doctor: ["config"],
  help: [],
  version: [],
};
const SWITCHES: Record<Command, readonly string[]> = {
  run: [],
  install: ["dry-run"],
  uninstall: [],
  doctor: ["check-token"],
  help: [],
  version: [],
};

export interface ParsedArgs {
  command: Command;
  /** config keys given as flags */
  config: RawConfig;
  /** --config */
  configPath?: string;
  /** other value flags, by name */
  values: Record<string, string>;
  switches: Set<string>;
}

export class UsageError extends Error {
  override readonly name = "UsageError";
}

export function parseArgs(argv: readonly string[]): ParsedArgs {
  const args = [...argv];
  let command: Command = "run";
  if (args[0] !== undefined && !args[0].startsWith("-")) {
    const name = args.shift()!;
    if (!(COMMANDS as readonly string[]).includes(name)) throw new UsageError(`unknown command "${name}" (commands: ${COMMANDS.join(", ")})`);
    command = name as Command;
  }
  const parsed: ParsedArgs = { command, config: {}, values: {}, switches: new Set() };
  while (args.length > 0) {
    const arg = args.shift()!;
    if (arg === "--help" || arg === "-h") {
      parsed.command = "help";
      continue;
    }
    if (arg === "--version") {
      parsed.command = "version";
      continue;
    }
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!match) throw new UsageError(`unexpected argument "${arg}"`);
    const [, name = "", inline] = match;
    if (SWITCHES[command].includes(name)) {
      if (inline !== undefined) throw new UsageError(`--${name} takes no value`);
      parsed.switches.add(name);
      continue;
    }
    const isConfigFlag = name in CONFIG_FLAGS;
    if (!isConfigFlag && !VALUE_FLAGS[command].includes(name)) throw new UsageError(`unknown option --${name} for "${command}"`);
    const value = inline ?? args.shift();
    if (value === undefined || (inline === undefined && value.startsWith("--"))) throw new UsageError(`--${name} needs a value`);
    if (isConfigFlag) parsed.config[CONFIG_FLAGS[name as keyof typeof CONFIG_FLAGS]] = value;
    else if (name === "config") parsed.configPath = value;
    else parsed.values[name === "env-path" ? "env-file" : name] = value;
  }
  return parsed;
}

/** Said on stderr whenever --token is given. */
export const TOKEN_FLAG_WARNING =
  "cm-agent: warning: --token puts the agent token on the command line, where every user of this machine reads it (ps). Set AGENT_TOKEN in the environment, or pass --token-file PATH (a file of mode 0600), instead.";

export const USAGE = `Usage: cm-agent [command] [options]
       (from a checkout: npm run agent -- [command] [options])

Commands:
  run (default)   connect to the control plane and run deployments
  install         write the systemd unit and /etc/cm-agent/agent.env, then enable the service
  uninstall       stop and disable the service, remove its unit and the egress policy's firewall rules
  doctor          check Docker, GPUs, the NVIDIA runtime, the egress policy, the control plane and the token
  version         print the agent's version (also --version)

Options (every command; they override the environment and the config file):
  --control-plane URL   the control plane, e.g. https://cp.example.com (env CONTROL_PLANE_URL)
  --token-file PATH     a file (mode 0600) holding this node's agent token (env AGENT_TOKEN_FILE);
                        or set AGENT_TOKEN to the token itself
  --token TOKEN         the token on the command line, where every local user reads it
                        with ps: kept for older scripts, with a warning
  --config PATH         KEY=VALUE or JSON file with the same keys (env AGENT_CONFIG)
  --docker-socket PATH  Docker's socket (env DOCKER_SOCKET, default /var/run/docker.sock)
  --state-dir DIR       where the agent may keep state (env AGENT_STATE_DIR)
  --log-level LEVEL     debug, info, warn, error or silent (env LOG_LEVEL, default info)

install:
  --dry-run             write nothing to the system and run no systemctl: print the files,
                        or write them only where --unit-dir / --env-file point
  --unit-dir DIR        default /etc/systemd/system
  --env-file PATH       default /etc/cm-agent/agent.env (mode 0600: it holds the token)
  --env-path PATH       the same; use it when the file does not exist yet, because
                        Node 20 itself reads --env-file anywhere on the command line

doctor:
  --check-token         no longer needed (kept for older scripts): the token is always
                        checked, and checking it never disturbs a running agent
`;
