// `npm run agent -- uninstall`: stops and disables the service, removes its unit
// and takes the egress policy off the firewall. The env file stays: it holds the
// node's token, which the operator may want for a later install (or delete).
// Tenants' containers are left to the control plane: removing a node's
// deployments is its business, not a side effect of removing the daemon.
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { InstallIo } from "./install";
import { DEFAULT_ENV_FILE, DEFAULT_UNIT_DIR, UNIT_NAME } from "./systemd-unit";

export interface UninstallOptions {
  unitDir?: string;
  envFile?: string;
  /** removes the egress policy's chains and jumps (egress/iptables.ts) */
  removeEgressPolicy(): Promise<void>;
}

/** Returns the process exit code. */
export async function runUninstall(options: UninstallOptions, io: InstallIo): Promise<number> {
  let failed = false;
  const unitPath = join(options.unitDir ?? DEFAULT_UNIT_DIR, UNIT_NAME);
  if (io.commandExists("systemctl")) {
    for (const args of [["disable", "--now", "cm-agent"]]) {
      io.print(`$ systemctl ${args.join(" ")}`);
      const result = await io.run("systemctl", args);
      // Not installed as a service is what uninstalling wants anyway.
      if (result.code !== 0 && !/not (be )?found|does not exist|No such file/i.test(result.output)) {
        io.print(`! systemctl ${args.join(" ")} failed (exit ${result.code}): ${result.output.trim()}`);
      }
    }
  }
  if (existsSync(unitPath)) {
    try {
      rmSync(unitPath);
      io.print(`✓ removed ${unitPath}`);
      if (io.commandExists("systemctl")) await io.run("systemctl", ["daemon-reload"]);
    } catch (error) {
      io.print(`✗ could not remove ${unitPath}: ${(error as Error).message}`);
      failed = true;
    }
  }
  try {
    await options.removeEgressPolicy();
    io.print("✓ removed the egress policy from the firewall");
  } catch (error) {
    io.print(`✗ could not remove the egress policy: ${(error as Error).message}`);
    io.print("  fix: run the uninstall as root");
    failed = true;
  }
  const envFile = options.envFile ?? DEFAULT_ENV_FILE;
  if (existsSync(envFile)) io.print(`  ${envFile} was kept: it holds this node's token (delete it if the node is gone for good)`);
  io.print(
    "  Tenants' containers still on this machine are the control plane's to remove: remove the node there first, or `docker rm -f` the containers labelled cm.managed=true.",
  );
  return failed ? 1 : 0;
}
