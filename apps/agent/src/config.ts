// The agent's configuration, parsed once. Sources, strongest first: command-line
// flags, environment variables, then a config file (KEY=VALUE lines as systemd's
// EnvironmentFile reads them, or a JSON object with the same keys). Nothing
// else in the agent reads the environment.
import { AGENT_RECONNECT_MAX_MS, AGENT_TUNNEL_PATH, AGENT_WS_PATH } from "@cm/protocol";
import { z } from "zod";
import type { EgressAllow } from "./egress/policy";
import { parseEgressAllow } from "./egress/policy";
import { DEFAULT_PULL_STALL_S, DEFAULT_PULL_TIMEOUT_S } from "./reconcile/pull-watch";
import { DEFAULT_SANDBOX_POOL } from "./runtime/sandboxes";

/** "silent" too, as the control plane's LOG_LEVEL allows it (`npm start` passes its environment on). */
export const LOG_LEVELS = ["debug", "info", "warn", "error", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The keys a config file or the environment may set. */
export const CONFIG_KEYS = [
  "CONTROL_PLANE_URL",
  "AGENT_TOKEN",
  "AGENT_TOKEN_FILE",
  "DOCKER_SOCKET",
  "AGENT_STATE_DIR",
  "LOG_LEVEL",
  "AGENT_SANDBOX_POOL",
  "AGENT_EGRESS_POLICY",
  "AGENT_EGRESS_ALLOW",
  "AGENT_DISK_DEFAULT_GB",
  "AGENT_DISK_RESERVE_GB",
  "AGENT_PULL_TIMEOUT_S",
  "AGENT_PULL_STALL_S",
  "AGENT_REGISTRY_ALLOW",
] as const;
export type ConfigKey = (typeof CONFIG_KEYS)[number];
export type RawConfig = Partial<Record<ConfigKey, string>>;

/**
 * Node's own variables, which a config file may set beside the agent's keys: systemd's
 * EnvironmentFile= puts them in the service's environment, where Node reads them as it
 * starts (a private CA for the control plane's certificate, flags such as
 * --max-semi-space-size). Proxies (HTTPS_PROXY) are not among them: neither Node 20's fetch
 * nor the ws client the agent connects with uses one.
 */
export const NODE_KEYS = ["NODE_EXTRA_CA_CERTS", "NODE_OPTIONS"] as const;
export type NodeKey = (typeof NODE_KEYS)[number];
export type NodeSettings = Partial<Record<NodeKey, string>>;

/** A config file, read: the agent's settings, Node's, and a warning for each key it knows neither of. */
export interface ConfigFile {
  path: string;
  config: RawConfig;
  node: NodeSettings;
  /** said, never fatal: the service's environment holds whatever the file has, and the agent reads only its keys */
  warnings: string[];
}

export const DEFAULT_DOCKER_SOCKET = "/var/run/docker.sock";

/** Tuning with production defaults; not read from the environment, tests shorten them. */
const Timing = z.object({
  backoffInitialMs: z.number().int().min(1).default(250),
  /** at most the protocol's ceiling: the control plane's grace after a restart counts on it */
  backoffMaxMs: z.number().int().min(1).max(AGENT_RECONNECT_MAX_MS).default(AGENT_RECONNECT_MAX_MS),
  /** a connection that stayed ready this long resets the backoff */
  stableConnectionMs: z.number().int().min(0).default(10_000),
  /** from opening the socket to welcome */
  helloTimeoutMs: z.number().int().min(1).default(10_000),
  pingIntervalMs: z.number().int().min(1).default(15_000),
  /** no pong (or any frame) this long after a ping: the TCP connection is half-open */
  pongTimeoutMs: z.number().int().min(1).default(10_000),
  specsIntervalMs: z
    .number()
    .int()
    .min(1)
    .default(10 * 60_000),
  /** SIGTERM, then SIGKILL after this, when a tenant's container is stopped */
  containerStopTimeoutS: z.number().int().min(0).default(10),
  logBatchLines: z.number().int().min(1).max(5000).default(1000),
  /** lines sent but not yet acknowledged before the follower pauses (flow control) */
  logMaxInflightLines: z.number().int().min(1).default(100_000),
  /** a log batch unanswered this long is sent again (doubling while none is answered) */
  logAckTimeoutMs: z.number().int().min(1).default(10_000),
  /** how often a container's log is read while it writes */
  logPollMs: z.number().int().min(1).default(100),
  /** reads back off to this while a container is quiet */
  logIdlePollMaxMs: z.number().int().min(1).default(1_000),
  /** how often the ports of running deployments are probed while one is not ready yet */
  endpointProbeMs: z.number().int().min(1).default(1_000),
  /** and once all are ready */
  endpointIdleProbeMs: z.number().int().min(1).default(15_000),
  /** how often the egress policy is checked (and put back) on the host's firewall */
  egressCheckMs: z.number().int().min(1).default(30_000),
  /** how often each running container's writable layer is measured against its disk allowance */
  diskCheckMs: z.number().int().min(1).default(60_000),
});
export type Timing = z.infer<typeof Timing>;

const SANDBOX_POOL_ERROR = "AGENT_SANDBOX_POOL must be a whole number from 0 to 32";
const EGRESS_POLICY_ERROR = 'AGENT_EGRESS_POLICY must be "on" or "off"';
const PULL_TIMEOUT_ERROR = "AGENT_PULL_TIMEOUT_S must be a whole number of seconds from 1";
const PULL_STALL_ERROR = "AGENT_PULL_STALL_S must be a whole number of seconds from 1";
const DISK_DEFAULT_ERROR = "AGENT_DISK_DEFAULT_GB must be a whole number of GB from 1";
const DISK_RESERVE_ERROR = "AGENT_DISK_RESERVE_GB must be a whole number of GB from 0";

/** AGENT_REGISTRY_ALLOW: "registry.lan:5000, 127.0.0.1:5000", each host[:port] as image references name them. */
const RegistryAllowList = z.union([z.string(), z.array(z.string())]).transform((value, ctx): string[] => {
  const names = Array.isArray(value) ? value : value.split(/[\s,]+/).filter(Boolean);
  for (const name of names)
    if (!/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/.test(name))
      ctx.issues.push({ code: "custom", message: `AGENT_REGISTRY_ALLOW: "${name}" is not a registry's host[:port], such as registry.lan:5000`, input: value });
  return names;
});

/** AGENT_EGRESS_ALLOW, parsed here so a typo stops the agent at start rather than leaving a range blocked or open. */
const EgressAllowList = z.union([z.string(), z.array(z.custom<EgressAllow>())]).transform((value, ctx): EgressAllow[] => {
  if (Array.isArray(value)) return value;
  const parsed = parseEgressAllow(value);
  if (parsed.ok) return parsed.allow;
  for (const message of parsed.problems) ctx.issues.push({ code: "custom", message, input: value });
  return z.NEVER;
});

export const AgentConfigInput = z.object({
  controlPlaneUrl: z.url({ protocol: /^(https?|wss?)$/, error: "CONTROL_PLANE_URL (or --control-plane) must be an http(s):// or ws(s):// URL" }),
  token: z.string({ error: "AGENT_TOKEN (or --token-file PATH) is required" }).trim().min(1, "AGENT_TOKEN is empty").max(200),
  dockerSocket: z.string().min(1).default(DEFAULT_DOCKER_SOCKET),
  stateDir: z.string().min(1).optional(),
  logLevel: z.enum(LOG_LEVELS).default("info"),
  /** network sandboxes kept ready so deployments start at once (runtime/sandboxes.ts); 0 makes each on demand */
  sandboxPool: z.coerce
    .number({ error: SANDBOX_POOL_ERROR })
    .int(SANDBOX_POOL_ERROR)
    .min(0, SANDBOX_POOL_ERROR)
    .max(32, SANDBOX_POOL_ERROR)
    .default(DEFAULT_SANDBOX_POOL),
  /** extra labels stamped on every container, and the filter for adopting them (tests use a per-run label) */
  containerLabels: z.record(z.string(), z.string()).default({}),
  /** "off" lets tenants' containers reach the host and its networks (egress/policy.ts); the node tells tenants */
  egressPolicy: z.enum(["on", "off"], { error: EGRESS_POLICY_ERROR }).default("on"),
  /** ranges and ports opened beyond the internet and DNS: "10.8.0.0/16, tcp/587, 192.168.1.20 tcp/5432" */
  egressAllow: EgressAllowList.default([]),
  /** the disk allowance of a deployment whose spec gives none (a custom image) */
  diskDefaultGb: z.coerce.number({ error: DISK_DEFAULT_ERROR }).int(DISK_DEFAULT_ERROR).min(1, DISK_DEFAULT_ERROR).default(20),
  /** free space on Docker's data root below which no new deployment starts */
  diskReserveGb: z.coerce.number({ error: DISK_RESERVE_ERROR }).int(DISK_RESERVE_ERROR).min(0, DISK_RESERVE_ERROR).default(10),
  /** registries tenants may pull from though they are on a private or local address (egress/registry-guard.ts) */
  registryAllow: RegistryAllowList.default([]),
  /** the longest an image pull may take (pull-watch.ts) */
  pullTimeoutS: z.coerce.number({ error: PULL_TIMEOUT_ERROR }).int(PULL_TIMEOUT_ERROR).min(1, PULL_TIMEOUT_ERROR).default(DEFAULT_PULL_TIMEOUT_S),
  /** the longest a pull may go without Docker reporting progress */
  pullStallS: z.coerce.number({ error: PULL_STALL_ERROR }).int(PULL_STALL_ERROR).min(1, PULL_STALL_ERROR).default(DEFAULT_PULL_STALL_S),
  timing: Timing.default(Timing.parse({})),
});
export type AgentConfigInput = z.input<typeof AgentConfigInput>;

export type AgentConfig = z.output<typeof AgentConfigInput> & {
  /** where the agent's WebSocket goes, e.g. wss://cp.example.com/agent/ws */
  wsUrl: string;
  /** the control plane's HTTP base, e.g. https://cp.example.com, for GET /health */
  httpUrl: string;
  /** where the agent opens one WebSocket per public-endpoint connection, e.g. wss://cp.example.com/agent/tunnel */
  tunnelUrl: string;
};

/** Throws a ConfigError listing every problem at once. */
export function parseAgentConfig(input: AgentConfigInput): AgentConfig {
  const result = AgentConfigInput.safeParse(input);
  if (!result.success) throw new ConfigError(result.error.issues.map((issue) => issue.message));
  const { wsUrl, httpUrl } = controlPlaneUrls(result.data.controlPlaneUrl);
  return { ...result.data, wsUrl, httpUrl, tunnelUrl: tunnelUrlOf(httpUrl) };
}

export class ConfigError extends Error {
  override readonly name = "ConfigError";
  constructor(readonly problems: string[]) {
    super(`invalid agent configuration: ${problems.join("; ")}`);
  }
}

/**
 * http(s)://host:port[/base] -> ws(s)://host:port[/base]/agent/ws. A ws(s) URL
 * is taken as the socket's own address when it has a path, else /agent/ws is added.
 */
export function controlPlaneUrls(controlPlaneUrl: string): { wsUrl: string; httpUrl: string } {
  const url = new URL(controlPlaneUrl);
  const base = url.pathname.replace(/\/+$/, "");
  const secure = url.protocol === "https:" || url.protocol === "wss:";
  const origin = `${secure ? "s" : ""}://${url.host}`;
  if (url.protocol.startsWith("ws")) {
    const wsPath = base === "" ? AGENT_WS_PATH : base;
    const httpBase = wsPath.endsWith(AGENT_WS_PATH) ? wsPath.slice(0, -AGENT_WS_PATH.length) : "";
    return { wsUrl: `ws${origin}${wsPath}${url.search}`, httpUrl: `http${origin}${httpBase}` };
  }
  return { wsUrl: `ws${origin}${base}${AGENT_WS_PATH}`, httpUrl: `http${origin}${base}` };
}

/** The tunnel endpoint beside the agent socket: http(s)://host:port[/base]/agent/tunnel. */
export function tunnelUrlOf(httpUrl: string): string {
  return `${httpUrl}${AGENT_TUNNEL_PATH}`;
}

/** Reads a config file: KEY=VALUE lines (comments, `export`, quotes allowed) or a JSON object. */
export function parseConfigFile(text: string, path: string): ConfigFile {
  const trimmed = text.trim();
  const pairs: Record<string, unknown> = trimmed.startsWith("{") ? parseJsonObject(trimmed, path) : parseEnvLines(trimmed);
  const file: ConfigFile = { path, config: {}, node: {}, warnings: [] };
  const unknown: string[] = [];
  for (const [key, value] of Object.entries(pairs)) {
    if (typeof value !== "string") throw new ConfigError([`${path}: ${key} must be a string`]);
    if ((CONFIG_KEYS as readonly string[]).includes(key)) file.config[key as ConfigKey] = value;
    else if ((NODE_KEYS as readonly string[]).includes(key)) file.node[key as NodeKey] = value;
    else unknown.push(key);
  }
  if (unknown.length > 0)
    file.warnings.push(
      `${path}: unknown key${unknown.length === 1 ? "" : "s"} ${unknown.join(", ")}, ignored (known: ${[...CONFIG_KEYS, ...NODE_KEYS].join(", ")})`,
    );
  return file;
}

function parseJsonObject(text: string, path: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    if (value && typeof value === "object" && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // reported below, with the path
  }
  throw new ConfigError([`${path}: not a JSON object`]);
}

function parseEnvLines(text: string): Record<string, string> {
  const pairs: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const match = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (!match || line.trim().startsWith("#")) continue;
    const [, key = "", value = ""] = match;
    pairs[key] = unquote(value);
  }
  return pairs;
}

/** systemd's EnvironmentFile rules, as far as the agent's own files need them. */
function unquote(value: string): string {
  if (/^'.*'$/.test(value)) return value.slice(1, -1);
  if (/^".*"$/.test(value)) return value.slice(1, -1).replace(/\\(["\\$`])/g, "$1");
  return value;
}

export interface ConfigSources {
  /** from the command line: --control-plane, --token, --token-file, --docker-socket, --state-dir, --log-level */
  flags: RawConfig;
  env: Record<string, string | undefined>;
  /** --config, else AGENT_CONFIG from the environment */
  configPath?: string;
  readFile: (path: string) => string;
  /** a file's mode (stat's), to refuse a token file other users can read; unchecked without it */
  fileMode?: (path: string) => number;
}

/** The config file the sources name (--config, else AGENT_CONFIG), read; undefined when they name none. */
export function readConfigFile(sources: Pick<ConfigSources, "env" | "configPath" | "readFile">): ConfigFile | undefined {
  const path = sources.configPath ?? sources.env.AGENT_CONFIG;
  if (!path) return undefined;
  let text: string;
  try {
    text = sources.readFile(path);
  } catch (error) {
    throw new ConfigError([`cannot read config file ${path}: ${(error as Error).message}`]);
  }
  return parseConfigFile(text, path);
}

/**
 * Merges the sources, flags over env over file; empty values count as unset.
 * The token comes from the strongest source that gives it, as AGENT_TOKEN or as
 * AGENT_TOKEN_FILE (--token-file), a file holding it: a token on the command line
 * is in every local user's `ps`, a file or the environment is not.
 */
export function mergeConfigSources(sources: ConfigSources): RawConfig {
  const fromFile = readConfigFile(sources)?.config ?? {};
  const layers = [sources.flags, sources.env, fromFile];
  const given = (layer: RawConfig | Record<string, string | undefined>, key: ConfigKey) => (layer[key] === "" ? undefined : layer[key]);
  const merged: RawConfig = {};
  for (const key of CONFIG_KEYS) {
    const value = layers.map((layer) => given(layer, key)).find((v) => v !== undefined);
    if (value !== undefined) merged[key] = value;
  }
  const tokenLayer = layers.find((layer) => given(layer, "AGENT_TOKEN") !== undefined || given(layer, "AGENT_TOKEN_FILE") !== undefined);
  delete merged.AGENT_TOKEN;
  delete merged.AGENT_TOKEN_FILE;
  if (tokenLayer) {
    const token = given(tokenLayer, "AGENT_TOKEN");
    const file = given(tokenLayer, "AGENT_TOKEN_FILE");
    if (token !== undefined && file !== undefined) throw new ConfigError(["AGENT_TOKEN and AGENT_TOKEN_FILE are both set: give the token one way"]);
    merged.AGENT_TOKEN = file === undefined ? token : readTokenFile(file, sources);
  }
  return merged;
}

function readTokenFile(path: string, sources: ConfigSources): string {
  let text: string;
  try {
    const mode = sources.fileMode?.(path);
    if (mode !== undefined && (mode & 0o077) !== 0)
      throw new Error(`other users may read it (mode ${(mode & 0o777).toString(8).padStart(4, "0")}): chmod 600 ${path}`);
    text = sources.readFile(path);
  } catch (error) {
    throw new ConfigError([`token file ${path}: ${(error as Error).message}`]);
  }
  return text.trim();
}

export function configFromRaw(raw: RawConfig): AgentConfig {
  return parseAgentConfig({
    controlPlaneUrl: raw.CONTROL_PLANE_URL ?? "",
    token: raw.AGENT_TOKEN as string,
    dockerSocket: raw.DOCKER_SOCKET,
    stateDir: raw.AGENT_STATE_DIR,
    logLevel: raw.LOG_LEVEL as LogLevel | undefined,
    ...(raw.AGENT_SANDBOX_POOL === undefined ? {} : { sandboxPool: raw.AGENT_SANDBOX_POOL }),
    ...(raw.AGENT_EGRESS_POLICY === undefined ? {} : { egressPolicy: raw.AGENT_EGRESS_POLICY as "on" | "off" }),
    ...(raw.AGENT_EGRESS_ALLOW === undefined ? {} : { egressAllow: raw.AGENT_EGRESS_ALLOW }),
    ...(raw.AGENT_DISK_DEFAULT_GB === undefined ? {} : { diskDefaultGb: raw.AGENT_DISK_DEFAULT_GB }),
    ...(raw.AGENT_DISK_RESERVE_GB === undefined ? {} : { diskReserveGb: raw.AGENT_DISK_RESERVE_GB }),
    ...(raw.AGENT_PULL_TIMEOUT_S === undefined ? {} : { pullTimeoutS: raw.AGENT_PULL_TIMEOUT_S }),
    ...(raw.AGENT_PULL_STALL_S === undefined ? {} : { pullStallS: raw.AGENT_PULL_STALL_S }),
    ...(raw.AGENT_REGISTRY_ALLOW === undefined ? {} : { registryAllow: raw.AGENT_REGISTRY_ALLOW }),
  });
}

export function loadAgentConfig(sources: ConfigSources): AgentConfig {
  return configFromRaw(mergeConfigSources(sources));
}

/**
 * Node's settings the config file gives and the environment lacks (the environment wins, as
 * for every key): Node read its variables as it started, so a process that should have them
 * must be started again with them, as the service is (EnvironmentFile=).
 */
export function nodeSettingsToApply(file: ConfigFile | undefined, env: Record<string, string | undefined>): NodeSettings {
  const apply: NodeSettings = {};
  for (const key of NODE_KEYS) {
    const value = file?.node[key];
    if (value && !env[key]) apply[key] = value;
  }
  return apply;
}
