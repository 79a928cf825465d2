import { describe, expect, it } from "vitest";
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
        "AGENT_TOKEN (or --token) is required",
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

  it("refuses unknown keys and unreadable files with the path", () => {
    expect(() => parseConfigFile("CONTROL_PLANE_URL=http://x\nAGENT_TOKNE=t\n", "/x.env")).toThrow("/x.env: unknown key AGENT_TOKNE");
    expect(() => loadAgentConfig({ flags: {}, env: {}, configPath: "/missing.env", readFile })).toThrow("cannot read config file /missing.env");
  });
});
