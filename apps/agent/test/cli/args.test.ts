import { describe, expect, it } from "vitest";
import { parseArgs, UsageError } from "../../src/cli/args";

describe("parseArgs", () => {
  it("runs the agent by default, with config flags in either form", () => {
    const args = parseArgs(["--control-plane", "https://cp", "--token=abc", "--log-level", "debug", "--config", "/etc/a.env"]);
    expect(args).toMatchObject({
      command: "run",
      config: { CONTROL_PLANE_URL: "https://cp", AGENT_TOKEN: "abc", LOG_LEVEL: "debug" },
      configPath: "/etc/a.env",
    });
  });

  it("parses install's switches and paths", () => {
    const args = parseArgs(["install", "--dry-run", "--unit-dir", "/tmp/u", "--env-file=/tmp/e.env", "--token", "t"]);
    expect(args.command).toBe("install");
    expect([...args.switches]).toEqual(["dry-run"]);
    expect(args.values).toEqual({ "unit-dir": "/tmp/u", "env-file": "/tmp/e.env" });
    expect(args.config).toEqual({ AGENT_TOKEN: "t" });
  });

  it("refuses what it does not know", () => {
    expect(() => parseArgs(["deploy"])).toThrow(UsageError);
    expect(() => parseArgs(["--dry-run"])).toThrow('unknown option --dry-run for "run"');
    expect(() => parseArgs(["--token"])).toThrow("--token needs a value");
    expect(() => parseArgs(["--token", "--log-level", "x"])).toThrow("--token needs a value");
    expect(() => parseArgs(["doctor", "extra"])).toThrow('unexpected argument "extra"');
  });

  it("answers --help anywhere", () => {
    expect(parseArgs(["install", "--help"]).command).toBe("help");
  });
});
