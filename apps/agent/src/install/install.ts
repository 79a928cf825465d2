// `npm run agent -- install`: writes the unit and the env file, then enables the
// service. Settings come from flags, the environment, a --config file, or an
// env file left by an earlier install (so re-running it keeps the token).
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { NodeSettings, RawConfig } from "../config";
import { ConfigError, configFromRaw, mergeConfigSources, parseConfigFile } from "../config";
import type { AgentPaths } from "./paths";
import { DEFAULT_ENV_FILE, DEFAULT_STATE_DIR, DEFAULT_UNIT_DIR, renderEnvFile, renderUnit, UNIT_NAME } from "./systemd-unit";

export interface InstallOptions {
  flags: RawConfig;
  configPath?: string;
  env: Record<string, string | undefined>;
  /** stat's mode of a file, to refuse a token file other users can read */
  fileMode?: (path: string) => number;
  dryRun: boolean;
  unitDir?: string;
  envFile?: string;
  paths: AgentPaths;
}

export interface InstallIo {
  print(line: string): void;
  /** runs a command; resolves with its exit code and output */
  run(command: string, args: string[]): Promise<{ code: number; output: string }>;
  commandExists(command: string): boolean;
}

export const SYSTEMCTL_STEPS: [string, string[]][] = [
  ["systemctl", ["daemon-reload"]],
  ["systemctl", ["enable", "--now", "cm-agent"]],
];

/** Returns the process exit code. */
export async function runInstall(options: InstallOptions, io: InstallIo): Promise<number> {
  const envFile = options.envFile ?? DEFAULT_ENV_FILE;
  const unitPath = join(options.unitDir ?? DEFAULT_UNIT_DIR, UNIT_NAME);
  let values: RawConfig;
  let previous: { config: RawConfig; node: NodeSettings } = { config: {}, node: {} };
  try {
    if (existsSync(envFile)) {
      const file = parseConfigFile(readFileSync(envFile, "utf8"), envFile);
      for (const warning of file.warnings) io.print(`! ${warning}`);
      // Its token resolved as the agent would (an AGENT_TOKEN_FILE read), to keep or to compare.
      const config = mergeConfigSources({ flags: {}, env: {}, configPath: envFile, readFile: (p) => readFileSync(p, "utf8"), fileMode: options.fileMode });
      previous = { config, node: file.node };
    }
    values = {
      ...previous.config,
      ...mergeConfigSources({
        flags: options.flags,
        env: options.env,
        configPath: options.configPath,
        readFile: (p) => readFileSync(p, "utf8"),
        fileMode: options.fileMode,
      }),
    };
    configFromRaw(values); // refuse a bad URL or a missing token before writing anything
  } catch (error) {
    const problems = error instanceof ConfigError ? error.problems : [(error as Error).message];
    for (const problem of problems) io.print(`✗ ${problem}`);
    io.print("  fix: pass --control-plane URL, and the token as AGENT_TOKEN or --token-file PATH (it is shown once when the node is enrolled)");
    return 2;
  }
  // Enrolling the machine again (a new node, a new token): the new values replace the old, saying so.
  if (previous.config.AGENT_TOKEN !== undefined && previous.config.AGENT_TOKEN !== values.AGENT_TOKEN)
    io.print(`✓ the token given replaces the one in ${envFile}`);
  if (previous.config.CONTROL_PLANE_URL !== undefined && previous.config.CONTROL_PLANE_URL !== values.CONTROL_PLANE_URL)
    io.print(`✓ the control plane ${values.CONTROL_PLANE_URL} replaces ${previous.config.CONTROL_PLANE_URL} in ${envFile}`);
  const envText = renderEnvFile({
    CONTROL_PLANE_URL: values.CONTROL_PLANE_URL!,
    AGENT_TOKEN: values.AGENT_TOKEN!,
    ...values,
    // systemd creates it (StateDirectory=cm-agent); `doctor` reads the agent's status there.
    AGENT_STATE_DIR: values.AGENT_STATE_DIR ?? DEFAULT_STATE_DIR,
    // The file's other settings stay: Node's (a private CA) with the agent's.
    ...previous.node,
  });
  const unitText = renderUnit(options.paths, envFile);

  try {
    if (!options.dryRun || options.envFile) writeSecretFile(envFile, envText, io);
    else printFile(io, envFile, envText.replace(/^AGENT_TOKEN=.*$/m, "AGENT_TOKEN=<hidden>"));
    if (!options.dryRun || options.unitDir) writeFile(unitPath, unitText, io);
    else printFile(io, unitPath, unitText);
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    io.print(`✗ ${message}`);
    if (code === "EACCES" || code === "EPERM") io.print("  fix: run the install as root (sudo npm run agent -- install ...)");
    return 1;
  }

  const commands = SYSTEMCTL_STEPS.map(([command, args]) => [command, ...args].join(" "));
  if (options.dryRun) {
    // Not systemctl's steps: they enable the unit in systemd's directory, which a dry run left unwritten.
    io.print("Dry run: nothing was installed or enabled. Run the same command without --dry-run (as root) to install and start the agent.");
    return 0;
  }
  if (!io.commandExists("systemctl")) {
    io.print("systemctl was not found; start the agent with your init system, or run:");
    io.print(`  ${commands.join(" && ")}`);
    return 0;
  }
  // enable --now leaves an agent that already runs on its old settings: restart that one.
  const wasActive = (await io.run("systemctl", ["is-active", "--quiet", "cm-agent"])).code === 0;
  const steps: [string, string[]][] = wasActive ? [...SYSTEMCTL_STEPS, ["systemctl", ["restart", "cm-agent"]]] : SYSTEMCTL_STEPS;
  for (const [command, args] of steps) {
    io.print(`$ ${[command, ...args].join(" ")}`);
    const result = await io.run(command, args);
    if (result.code !== 0) {
      io.print(`✗ ${command} ${args.join(" ")} failed (exit ${result.code}): ${result.output.trim()}`);
      return 1;
    }
  }
  io.print("✓ cm-agent is enabled and running. Follow it with: journalctl -u cm-agent -f");
  io.print("  Check the setup with: npm run agent -- doctor --config " + envFile);
  return 0;
}

function writeSecretFile(path: string, text: string, io: InstallIo): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileSync(path, text, { mode: 0o600 });
  // writeFile keeps the mode of a file that already exists; the token must not stay readable.
  chmodSync(path, 0o600);
  io.print(`✓ wrote ${path} (mode 0600)`);
}

function writeFile(path: string, text: string, io: InstallIo): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text, { mode: 0o644 });
  io.print(`✓ wrote ${path}`);
}

function printFile(io: InstallIo, path: string, text: string): void {
  io.print(`--- ${path} (not written: dry run)`);
  for (const line of text.trimEnd().split("\n")) io.print(line);
}
