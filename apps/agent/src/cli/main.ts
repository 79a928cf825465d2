// Dispatches the command line. Returns an exit code; only index.ts exits.
import { execFile, spawnSync } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import type { AgentConfig, ConfigFile, NodeSettings, RawConfig } from "../config";
import { ConfigError, configFromRaw, DEFAULT_DOCKER_SOCKET, mergeConfigSources, nodeSettingsToApply, readConfigFile } from "../config";
import { createDeps, dockerSocketPath, egressPolicyOf, hostResolvers } from "../deps";
import { spawnCommand } from "../egress/command";
import { IptablesFirewall } from "../egress/iptables";
import { SystemHostProbe } from "../host/probe";
import { nodeSettingsCheck, runDoctor } from "../install/doctor";
import { runInstall } from "../install/install";
import { agentPaths } from "../install/paths";
import { EXIT_CONFIG } from "../install/systemd-unit";
import { runUninstall } from "../install/uninstall";
import { DockerRuntime } from "../runtime/docker-runtime";
import { readStatusFile } from "../state-file";
import { AGENT_VERSION } from "../version";
import { type ParsedArgs, parseArgs, TOKEN_FLAG_WARNING, USAGE, UsageError } from "./args";
import type { SignalSource } from "./run-agent";
import { runAgentUntilSignal } from "./run-agent";

export interface CliIo {
  env: Record<string, string | undefined>;
  stdout(line: string): void;
  stderr(line: string): void;
  onSignal: SignalSource;
  /**
   * Runs this same command line again in a new Node process with `env`, passing signals on;
   * resolves with its exit code. For Node's settings in a config file, which Node reads only
   * as it starts (config.ts, NODE_KEYS). Without it they are reported as not in effect.
   */
  relaunch?: (env: Record<string, string | undefined>) => Promise<number>;
}

export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let args: ParsedArgs;
  try {
    args = parseArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.stderr(`${error.message}\n\n${USAGE}`);
    return 2;
  }
  if (args.config.AGENT_TOKEN !== undefined) io.stderr(TOKEN_FLAG_WARNING);
  const sources = { flags: args.config, env: io.env, configPath: args.configPath, readFile: (path: string) => readFileSync(path, "utf8"), fileMode };

  // The config file's Node settings (a private CA) hold for run and doctor as they hold for the service.
  let file: ConfigFile | undefined;
  let notApplied: NodeSettings = {};
  if (args.command === "run" || args.command === "doctor") {
    try {
      file = readConfigFile(sources);
    } catch {
      // reported with the configuration's other problems below
    }
    notApplied = nodeSettingsToApply(file, io.env);
    if (Object.keys(notApplied).length > 0 && io.relaunch) return io.relaunch({ ...io.env, ...notApplied });
  }

  switch (args.command) {
    case "help":
      io.stdout(USAGE);
      return 0;
    case "version":
      io.stdout(AGENT_VERSION);
      return 0;
    case "install":
      return runInstall(
        {
          flags: args.config,
          configPath: args.configPath,
          env: io.env,
          fileMode,
          dryRun: args.switches.has("dry-run"),
          unitDir: args.values["unit-dir"],
          envFile: args.values["env-file"],
          paths: agentPaths(),
        },
        { print: io.stdout, run: runCommand, commandExists },
      );
    case "uninstall":
      return runUninstall(
        {
          unitDir: args.values["unit-dir"],
          envFile: args.values["env-file"],
          // The chains are named the same whatever was allowed: the defaults find them.
          removeEgressPolicy: () => new IptablesFirewall(egressPolicyOf([], []), spawnCommand).remove(),
        },
        { print: io.stdout, run: runCommand, commandExists },
      );
    case "doctor": {
      let config: { ok: true; value: AgentConfig } | { ok: false; problems: string[] };
      let dockerSocket = DEFAULT_DOCKER_SOCKET;
      const configWarnings = [...(file?.warnings ?? [])];
      try {
        const raw = mergeConfigSources(sources);
        configWarnings.push(...overridden(file, raw));
        dockerSocket = dockerSocketPath(raw.DOCKER_SOCKET ?? DEFAULT_DOCKER_SOCKET);
        config = { ok: true, value: configFromRaw(raw) };
      } catch (error) {
        config = { ok: false, problems: error instanceof ConfigError ? error.problems : [(error as Error).message] };
      }
      const engine = new DockerRuntime({ socketPath: dockerSocket });
      const status = config.ok && config.value.stateDir ? readStatusFile(config.value.stateDir) : undefined;
      const nodeSettings = nodeSettingsCheck(io.env, notApplied, (path) => readFileSync(path, "utf8"));
      return runDoctor({
        config,
        configWarnings,
        ...(nodeSettings ? { nodeSettings } : {}),
        dockerSocket,
        engine,
        hostProbe: new SystemHostProbe(),
        fetch,
        egress: new IptablesFirewall(egressPolicyOf(config.ok ? config.value.egressAllow : [], hostResolvers()), spawnCommand),
        ...(status ? { agentStatus: { status, alive: processAlive(status.pid) } } : {}),
        print: io.stdout,
      });
    }
    case "run": {
      let config: AgentConfig;
      try {
        config = configFromRaw(mergeConfigSources(sources));
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        for (const problem of error.problems) io.stderr(`cm-agent: ${problem}`);
        io.stderr("Run `cm-agent --help` for the options.");
        return EXIT_CONFIG;
      }
      for (const warning of file?.warnings ?? []) io.stderr(`cm-agent: warning: ${warning}`);
      return runAgentUntilSignal(config, createDeps(config), io.onSignal);
    }
  }
}

/**
 * Where the command line or the environment overrides the config file's control plane or
 * token: doctor then checks those, while the service (EnvironmentFile=) reads the file's.
 */
function overridden(file: ConfigFile | undefined, merged: RawConfig): string[] {
  if (!file) return [];
  return (["CONTROL_PLANE_URL", "AGENT_TOKEN"] as const)
    .filter((key) => file.config[key] !== undefined && merged[key] !== file.config[key])
    .map((key) => `${key} given on the command line or in the environment is checked, not ${file.path}'s, which the service reads`);
}

function runCommand(command: string, args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { encoding: "utf8" }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
      resolve({ code, output: `${stdout}${stderr}` });
    });
  });
}

const fileMode = (path: string) => statSync(path).mode;

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function commandExists(command: string): boolean {
  return spawnSync("sh", ["-c", `command -v ${command}`], { stdio: "ignore" }).status === 0;
}
