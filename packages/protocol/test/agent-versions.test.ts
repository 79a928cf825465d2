import { describe, expect, it } from "vitest";
import { agentUpdateLevel, compareVersions, MIN_SUPPORTED_AGENT_VERSION, RECOMMENDED_AGENT_VERSION } from "../src/agent-versions";

describe("agents' versions", () => {
  it("compares releases by number, not by text, and ignores build and pre-release suffixes", () => {
    expect(compareVersions("0.10.0", "0.9.9")).toBeGreaterThan(0);
    expect(compareVersions("1.2.3+test.1", "1.2.3")).toBe(0);
    expect(compareVersions("v0.2.0", "0.2.1")).toBeLessThan(0);
    expect(compareVersions("latest", "0.2.0")).toBeUndefined();
  });

  it("flags an agent below the recommended version, and one below the supported one as required", () => {
    expect(agentUpdateLevel(RECOMMENDED_AGENT_VERSION)).toBe("none");
    expect(agentUpdateLevel(`${RECOMMENDED_AGENT_VERSION}+test.2`)).toBe("none");
    expect(agentUpdateLevel("99.0.0")).toBe("none");
    expect(agentUpdateLevel(MIN_SUPPORTED_AGENT_VERSION)).toBe(
      compareVersions(MIN_SUPPORTED_AGENT_VERSION, RECOMMENDED_AGENT_VERSION)! < 0 ? "recommended" : "none",
    );
    expect(agentUpdateLevel("0.0.1")).toBe("required");
    expect(agentUpdateLevel("not-a-version")).toBe("required");
    expect(agentUpdateLevel(null)).toBeNull();
  });
});
