// `install`: the unit and the env file it writes, and what it runs afterwards.
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { needs } from "@cm/testkit";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../../src/cli/main";
import { parseConfigFile } from "../../src/config";
import type { InstallIo } from "../../src/install/install";
import { runInstall } from "../../src/install/install";
import { agentPaths } from "../../src/install/paths";
import { renderEnvFile, systemdWord } from "../../src/install/systemd-unit";

let dir = "";
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "cm-agent-install-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function io(commands: string[] = [], systemctl = true): InstallIo & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    print: (line) => lines.push(line),
    run: async (command, args) => {
      commands.push([command, ...args].join(" "));
      return { code: args.includes("is-active") ? 3 : 0, output: "" };
    },
    commandExists: () => systemctl,
  };
}

async function cli(argv: string[]): Promise<{ code: number; out: string }> {
  const out: string[] = [];
  const code = await runCli(argv, { env: {}, stdout: (l) => out.push(l), stderr: (l) => out.push(l), onSignal: () => () => {} });
  return { code, out: out.join("\n") };
}

describe("install", () => {
  it("--dry-run --unit-dir writes the unit and a 0600 env file there, and runs no systemctl", async () => {
    const envFile = join(dir, "etc/cm-agent/agent.env");
    const { code, out } = await cli([
      "install",
      "--dry-run",
      "--unit-dir",
      dir,
      "--env-path",
      envFile,
      "--control-plane",
      "https://cp.example.com",
      "--token",
      "tok_secret",
    ]);
    expect(code).toBe(0);
    // systemctl cannot enable a unit that is not in systemd's directory: no such advice after a dry run.
    expect(out).toContain("Dry run: nothing was installed or enabled. Run the same command without --dry-run (as root)");
    expect(out).not.toContain("systemctl enable");

    const unit = readFileSync(join(dir, "cm-agent.service"), "utf8");
    const paths = agentPaths();
    for (const line of [
      "[Unit]",
      "Requires=docker.service",
      "After=docker.service network-online.target",
      "Wants=network-online.target",
      "[Service]",
      `EnvironmentFile=${envFile}`,
      `ExecStart=${paths.node} --import ${paths.tsxLoader} ${paths.entry} run`,
      "Restart=always",
      "RestartSec=5",
      "RestartPreventExitStatus=78",
      "KillSignal=SIGTERM",
      "TimeoutStopSec=30",
      "StateDirectory=cm-agent",
      "[Install]",
      "WantedBy=multi-user.target",
    ]) {
      expect(unit.split("\n")).toContain(line);
    }
    expect(unit).not.toContain("tok_secret");
    expect(paths.tsxLoader).toMatch(/^\/.*node_modules\/tsx\/dist\/loader\.mjs$/);
    expect(existsSync(paths.entry)).toBe(true);

    expect(statSync(envFile).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "etc/cm-agent")).mode & 0o777).toBe(0o700);
    expect(parseConfigFile(readFileSync(envFile, "utf8"), envFile).config).toEqual({
      CONTROL_PLANE_URL: "https://cp.example.com",
      AGENT_TOKEN: "tok_secret",
      AGENT_STATE_DIR: "/var/lib/cm-agent",
    });
  });

  needs("systemd-analyze").it("systemd accepts the unit, against the units it names", async () => {
    const envFile = join(dir, "agent.env");
    await cli(["install", "--dry-run", "--unit-dir", dir, "--env-path", envFile, "--control-plane", "http://cp:8080", "--token", "t"]);
    // The unit Requires= docker.service: a stub beside it stands in for Docker's own, so the
    // verdict is the same on a machine without Docker. The trailing ":" keeps systemd's
    // own directories (network-online.target, multi-user.target) after this one.
    writeFileSync(join(dir, "docker.service"), "[Unit]\nDescription=stand-in for Docker's unit\n[Service]\nExecStart=/bin/true\n");
    execFileSync("systemd-analyze", ["verify", join(dir, "cm-agent.service")], { stdio: "pipe", env: { ...process.env, SYSTEMD_UNIT_PATH: `${dir}:` } });
  });

  it("--dry-run alone writes nothing and prints both files with the token hidden", async () => {
    const result = io();
    const code = await runInstall(
      { flags: { CONTROL_PLANE_URL: "https://cp", AGENT_TOKEN: "tok_secret" }, env: {}, dryRun: true, envFile: undefined, paths: agentPaths() },
      result,
    );
    expect(code).toBe(0);
    const out = result.lines.join("\n");
    expect(out).toContain("--- /etc/cm-agent/agent.env (not written: dry run)");
    expect(out).toContain("AGENT_TOKEN=<hidden>");
    expect(out).toContain("--- /etc/systemd/system/cm-agent.service (not written: dry run)");
    expect(out).not.toContain("tok_secret");
  });

  it("enables the service with systemctl, keeps the token of an earlier install, and tightens the env file's mode", async () => {
    const envFile = join(dir, "agent.env");
    writeFileSync(envFile, "CONTROL_PLANE_URL=https://old\nAGENT_TOKEN=kept\n", { mode: 0o644 });
    const commands: string[] = [];
    const code = await runInstall(
      { flags: { CONTROL_PLANE_URL: "https://new" }, env: {}, dryRun: false, unitDir: dir, envFile, paths: agentPaths() },
      io(commands),
    );
    expect(code).toBe(0);
    expect(commands).toEqual(["systemctl is-active --quiet cm-agent", "systemctl daemon-reload", "systemctl enable --now cm-agent"]);
    expect(parseConfigFile(readFileSync(envFile, "utf8"), envFile).config).toEqual({
      CONTROL_PLANE_URL: "https://new",
      AGENT_TOKEN: "kept",
      AGENT_STATE_DIR: "/var/lib/cm-agent",
    });
    expect(statSync(envFile).mode & 0o777).toBe(0o600);
  });

  it("enrolling again: the token and control plane given replace the file's, saying so; its other settings, Node's included, stay", async () => {
    const envFile = join(dir, "agent.env");
    writeFileSync(
      envFile,
      "CONTROL_PLANE_URL=https://old\nAGENT_TOKEN=cmn_retired\nAGENT_EGRESS_ALLOW=10.8.0.0/16\nNODE_EXTRA_CA_CERTS=/etc/cm-agent/ca.pem\n",
      { mode: 0o600 },
    );
    const result = io();
    const code = await runInstall(
      { flags: { CONTROL_PLANE_URL: "https://new" }, env: { AGENT_TOKEN: "cmn_new" }, dryRun: false, unitDir: dir, envFile, paths: agentPaths() },
      result,
    );
    expect(code).toBe(0);
    expect(result.lines).toContain(`✓ the token given replaces the one in ${envFile}`);
    expect(result.lines).toContain(`✓ the control plane https://new replaces https://old in ${envFile}`);
    const file = parseConfigFile(readFileSync(envFile, "utf8"), envFile);
    expect(file.config).toEqual({
      CONTROL_PLANE_URL: "https://new",
      AGENT_TOKEN: "cmn_new",
      AGENT_EGRESS_ALLOW: "10.8.0.0/16",
      AGENT_STATE_DIR: "/var/lib/cm-agent",
    });
    expect(file.node).toEqual({ NODE_EXTRA_CA_CERTS: "/etc/cm-agent/ca.pem" });
  });

  it("refuses to write anything without a token", async () => {
    const result = io();
    const code = await runInstall(
      { flags: { CONTROL_PLANE_URL: "https://cp" }, env: {}, dryRun: false, unitDir: dir, envFile: join(dir, "agent.env"), paths: agentPaths() },
      result,
    );
    expect(code).toBe(2);
    expect(result.lines[0]).toBe("✗ AGENT_TOKEN (or --token-file PATH) is required");
    expect(existsSync(join(dir, "cm-agent.service"))).toBe(false);
  });

  it("takes the token from --token-file or AGENT_TOKEN into the 0600 env file; --token works with a warning on stderr", async () => {
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, "cmn_from_file\n", { mode: 0o600 });
    const envFile = join(dir, "agent.env");
    const run = async (argv: string[], env: Record<string, string> = {}) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await runCli(argv, { env, stdout: (l) => out.push(l), stderr: (l) => err.push(l), onSignal: () => () => {} });
      return { code, out: out.join("\n"), err: err.join("\n") };
    };
    const install = ["install", "--dry-run", "--unit-dir", dir, "--env-path", envFile, "--control-plane", "https://cp.example.com"];

    const fromFile = await run([...install, "--token-file", tokenFile]);
    expect(fromFile).toMatchObject({ code: 0, err: "" });
    expect(parseConfigFile(readFileSync(envFile, "utf8"), envFile).config.AGENT_TOKEN).toBe("cmn_from_file");
    expect(statSync(envFile).mode & 0o777).toBe(0o600);

    const fromEnv = await run(install, { AGENT_TOKEN: "cmn_from_env" });
    expect(fromEnv).toMatchObject({ code: 0, err: "" });
    expect(parseConfigFile(readFileSync(envFile, "utf8"), envFile).config.AGENT_TOKEN).toBe("cmn_from_env");

    const fromFlag = await run([...install, "--token", "cmn_from_flag"]);
    expect(fromFlag.code).toBe(0);
    expect(fromFlag.err).toContain("warning: --token puts the agent token on the command line");
    expect(fromFlag.err).toContain("AGENT_TOKEN");
    expect(fromFlag.err).toContain("--token-file PATH");
    expect(parseConfigFile(readFileSync(envFile, "utf8"), envFile).config.AGENT_TOKEN).toBe("cmn_from_flag");

    chmodSync(tokenFile, 0o644);
    const open = await run([...install, "--token-file", tokenFile]);
    expect(open.code).toBe(2);
    expect(open.out).toContain(`✗ token file ${tokenFile}: other users may read it (mode 0644): chmod 600 ${tokenFile}`);
  });

  it("quotes what systemd and the env file would misread", () => {
    expect(systemdWord("/opt/my repo/node")).toBe('"/opt/my repo/node"');
    expect(systemdWord("/opt/100%/x$y")).toBe("/opt/100%%/x$$y");
    const text = renderEnvFile({ CONTROL_PLANE_URL: "https://cp", AGENT_TOKEN: 'a b"c$d' });
    expect(parseConfigFile(text, "x").config).toEqual({ CONTROL_PLANE_URL: "https://cp", AGENT_TOKEN: 'a b"c$d' });
  });
});
