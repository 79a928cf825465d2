import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, controlPlaneUrls, loadAgentConfig, parseAgentConfig, parseConfigFile } from "../src/config";

const files: Record<string, string> = {
  "/etc/cm-agent/agent.env": `# comment
CONTROL_PLANE_URL=https://cp.example.com
export AGENT_TOKEN="tok en \\"quoted\\""
LOG_LEVEL='debug'
`,
  "/etc/cm-agent/agent.json": JSON.stringify({ CONTROL_PLANE_URL: "http://10.0.0.5:8080", AGENT_TOKEN: "json-token" }),
};
const readFile = (path: string) => {
  const text = files[path];
  if (text === undefined) throw new Error(`ENOENT: no such file ${path}`);
  return text;
};

describe("controlPlaneUrls", () => {
  it.each([
    ["http://cp.local:8080", "ws://cp.local:8080/agent/ws", "http://cp.local:8080"],
    ["https://cp.example.com/", "wss://cp.example.com/agent/ws", "https://cp.example.com"],
    ["https://example.com/marketplace/", "wss://example.com/marketplace/agent/ws", "https://example.com/marketplace"],
    ["wss://cp.example.com", "wss://cp.example.com/agent/ws", "https://cp.example.com"],
    ["ws://127.0.0.1:9000/agent/ws", "ws://127.0.0.1:9000/agent/ws", "http://127.0.0.1:9000"],
  ])("%s -> %s", (input, wsUrl, httpUrl) => {
    expect(controlPlaneUrls(input)).toEqual({ wsUrl, httpUrl });
  });
});

describe("agent config", () => {
  it("applies defaults and derives the socket URL", () => {
    const config = parseAgentConfig({ controlPlaneUrl: "https://cp.example.com", token: "t" });
    expect(config).toMatchObject({
      wsUrl: "wss://cp.example.com/agent/ws",
      tunnelUrl: "https://cp.example.com/agent/tunnel",
      dockerSocket: "/var/run/docker.sock",
      logLevel: "info",
      containerLabels: {},
    });
    expect(parseAgentConfig({ controlPlaneUrl: "http://h:8080/base/", token: "t" }).tunnelUrl).toBe("http://h:8080/base/agent/tunnel");
    expect(config.stateDir).toBeUndefined();
    expect(config.timing).toMatchObject({ backoffInitialMs: 250, backoffMaxMs: 30_000, logBatchLines: 1000, specsIntervalMs: 600_000 });
  });

  it("reads AGENT_SANDBOX_POOL, 2 by default, and refuses what is not 0 to 32", () => {
    const load = (env: Record<string, string>) => loadAgentConfig({ flags: {}, env: { CONTROL_PLANE_URL: "https://cp", AGENT_TOKEN: "t", ...env }, readFile });
    expect(load({}).sandboxPool).toBe(2);
    expect(load({ AGENT_SANDBOX_POOL: "0" }).sandboxPool).toBe(0);
    expect(load({ AGENT_SANDBOX_POOL: "8" }).sandboxPool).toBe(8);
    for (const bad of ["-1", "33", "1.5", "many"]) {
      expect(() => load({ AGENT_SANDBOX_POOL: bad }), bad).toThrow("AGENT_SANDBOX_POOL must be a whole number from 0 to 32");
    }
  });

  it("lists every problem at once", () => {
    try {
      parseAgentConfig({ controlPlaneUrl: "ftp://nope", token: undefined as unknown as string, logLevel: "loud" as "info" });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems).toEqual([
        "CONTROL_PLANE_URL (or --control-plane) must be an http(s):// or ws(s):// URL",
        "AGENT_TOKEN (or --token-file PATH) is required",
        expect.stringContaining("debug"),
      ]);
    }
  });

  it("takes flags over the environment over the config file", () => {
    const config = loadAgentConfig({
      flags: { AGENT_TOKEN: "from-flag" },
      env: { CONTROL_PLANE_URL: "http://from-env:1", AGENT_TOKEN: "from-env", DOCKER_SOCKET: "", OTHER: "x" },
      configPath: "/etc/cm-agent/agent.env",
      readFile,
    });
    expect(config).toMatchObject({ controlPlaneUrl: "http://from-env:1", token: "from-flag", logLevel: "debug" });
  });

  it("reads KEY=VALUE and JSON config files, also through AGENT_CONFIG", () => {
    expect(loadAgentConfig({ flags: {}, env: {}, configPath: "/etc/cm-agent/agent.env", readFile })).toMatchObject({
      controlPlaneUrl: "https://cp.example.com",
      token: 'tok en "quoted"',
    });
    expect(loadAgentConfig({ flags: {}, env: { AGENT_CONFIG: "/etc/cm-agent/agent.json" }, readFile })).toMatchObject({
      wsUrl: "ws://10.0.0.5:8080/agent/ws",
      token: "json-token",
    });
  });

  it("warns of unknown keys, naming the keys it knows; takes Node's own; refuses unreadable files, with the path", () => {
    const file = parseConfigFile(
      "CONTROL_PLANE_URL=http://x\nAGENT_TOKNE=t\nNODE_EXTRA_CA_CERTS=/etc/cm-agent/ca.pem\nNODE_OPTIONS='--max-semi-space-size=1'\n",
      "/x.env",
    );
    expect(file.config).toEqual({ CONTROL_PLANE_URL: "http://x" });
    expect(file.node).toEqual({ NODE_EXTRA_CA_CERTS: "/etc/cm-agent/ca.pem", NODE_OPTIONS: "--max-semi-space-size=1" });
    expect(file.warnings).toEqual([
      "/x.env: unknown key AGENT_TOKNE, ignored (known: CONTROL_PLANE_URL, AGENT_TOKEN, AGENT_TOKEN_FILE, DOCKER_SOCKET, AGENT_STATE_DIR, LOG_LEVEL, AGENT_SANDBOX_POOL, AGENT_EGRESS_POLICY, AGENT_EGRESS_ALLOW, AGENT_DISK_DEFAULT_GB, AGENT_DISK_RESERVE_GB, AGENT_PULL_TIMEOUT_S, AGENT_PULL_STALL_S, AGENT_REGISTRY_ALLOW, NODE_EXTRA_CA_CERTS, NODE_OPTIONS)",
    ]);
    expect(() => loadAgentConfig({ flags: {}, env: {}, configPath: "/missing.env", readFile })).toThrow("cannot read config file /missing.env");
  });
});

describe("the token from a file or the environment, never only the command line", () => {
  const dir = mkdtempSync(join(tmpdir(), "cm-agent-token-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const sources = (flags: Record<string, string>, env: Record<string, string> = {}) => ({
    flags,
    env: { CONTROL_PLANE_URL: "http://cp:8080", ...env },
    readFile: (path: string) => readFileSync(path, "utf8"),
    fileMode: (path: string) => statSync(path).mode,
  });
  const tokenFile = (name: string, text: string, mode: number) => {
    const path = join(dir, name);
    writeFileSync(path, text, { mode });
    chmodSync(path, mode);
    return path;
  };

  it("reads --token-file and AGENT_TOKEN_FILE, a file of mode 0600 whose trailing newline is not the token's", () => {
    const path = tokenFile("token", "cmn_from_file\n", 0o600);
    expect(loadAgentConfig(sources({ AGENT_TOKEN_FILE: path })).token).toBe("cmn_from_file");
    expect(loadAgentConfig(sources({}, { AGENT_TOKEN_FILE: path })).token).toBe("cmn_from_file");
    expect(loadAgentConfig(sources({}, { AGENT_TOKEN: "cmn_from_env" })).token).toBe("cmn_from_env");
  });

  it("takes the token from the strongest source that gives it, in either form", () => {
    const path = tokenFile("token2", "cmn_file", 0o600);
    expect(loadAgentConfig(sources({ AGENT_TOKEN_FILE: path }, { AGENT_TOKEN: "cmn_env" })).token).toBe("cmn_file");
    expect(loadAgentConfig(sources({ AGENT_TOKEN: "cmn_flag" }, { AGENT_TOKEN_FILE: path })).token).toBe("cmn_flag");
  });

  it("refuses a token file other users can read, one it cannot read, and both forms from one source", () => {
    const open = tokenFile("open", "cmn_x", 0o644);
    expect(() => loadAgentConfig(sources({ AGENT_TOKEN_FILE: open }))).toThrow(`token file ${open}: other users may read it (mode 0644): chmod 600 ${open}`);
    expect(() => loadAgentConfig(sources({ AGENT_TOKEN_FILE: join(dir, "missing") }))).toThrow(`token file ${join(dir, "missing")}: ENOENT`);
    const path = tokenFile("token3", "cmn_file", 0o600);
    expect(() => loadAgentConfig(sources({}, { AGENT_TOKEN: "cmn_env", AGENT_TOKEN_FILE: path }))).toThrow(
      "AGENT_TOKEN and AGENT_TOKEN_FILE are both set: give the token one way",
    );
    expect(() => loadAgentConfig(sources({ AGENT_TOKEN_FILE: tokenFile("empty", "\n", 0o600) }))).toThrow("AGENT_TOKEN is empty");
  });
});
