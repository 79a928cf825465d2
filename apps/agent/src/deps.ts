// The one place that builds the agent's real dependencies from its config.
import { readFileSync } from "node:fs";
import type { AgentDeps } from "./agent";
import { systemClock } from "./clock";
import type { AgentConfig } from "./config";
import { wsSocketFactory } from "./connection/socket";
import { spawnCommand } from "./egress/command";
import { EgressGuard } from "./egress/egress-guard";
import { IptablesFirewall } from "./egress/iptables";
import type { EgressAllow, EgressPolicy } from "./egress/policy";
import { EGRESS_CHAIN, INPUT_CHAIN, parseResolvConf } from "./egress/policy";
import { SystemHostProbe } from "./host/probe";
import type { Logger } from "./logger";
import { createLogger } from "./logger";
import { DEFAULT_BRIDGE_PREFIX } from "./runtime/create-options";
import { DockerRuntime } from "./runtime/docker-runtime";

type DepsConfig = Pick<AgentConfig, "dockerSocket" | "logLevel"> & Partial<Pick<AgentConfig, "sandboxPool" | "egressPolicy" | "egressAllow" | "timing">>;

export function createDeps(config: DepsConfig, logger: Logger = createLogger({ level: config.logLevel })): AgentDeps {
  const runtime = new DockerRuntime({
    socketPath: dockerSocketPath(config.dockerSocket),
    logger,
    ...(config.sandboxPool === undefined ? {} : { sandboxPool: config.sandboxPool }),
  });
  const hostProbe = new SystemHostProbe({ dockerEngine: () => runtime.engineInfo() });
  const egress = new EgressGuard({
    firewall: new IptablesFirewall(() => egressPolicyOf(config.egressAllow ?? [], hostResolvers()), spawnCommand),
    enabled: config.egressPolicy !== "off",
    clock: systemClock,
    logger,
    ...(config.timing ? { checkIntervalMs: config.timing.egressCheckMs } : {}),
    engine: runtime,
  });
  return { runtime, hostProbe, socketFactory: wsSocketFactory(), clock: systemClock, logger, egress, disk: runtime };
}

/** The policy an agent installs: the defaults, opened where the operator allowed. `doctor` and `uninstall` build the same. */
export function egressPolicyOf(allow: EgressAllow[], resolvers: string[]): EgressPolicy {
  return { interfacePrefix: DEFAULT_BRIDGE_PREFIX, egressChain: EGRESS_CHAIN, inputChain: INPUT_CHAIN, allow, resolvers };
}

/**
 * The resolvers Docker's embedded DNS forwards to, as dockerd picks them: the
 * host's resolv.conf, or systemd-resolved's upstream list when that one names
 * only its local stub.
 */
export function hostResolvers(read: (path: string) => string = (path) => readFileSync(path, "utf8")): string[] {
  const tryRead = (path: string) => {
    try {
      return parseResolvConf(read(path));
    } catch {
      return [];
    }
  };
  const main = tryRead("/etc/resolv.conf");
  const usable = main.filter((address) => !address.startsWith("127.") && address !== "::1");
  return usable.length > 0 ? usable : tryRead("/run/systemd/resolve/resolv.conf");
}

/** DOCKER_SOCKET may be a path or a unix:// URL, as DOCKER_HOST is written. */
export function dockerSocketPath(value: string): string {
  return value.replace(/^unix:\/\//, "");
}
