import { readFileSync } from "node:fs";
import { agentUpdateLevel, compareVersions, RECOMMENDED_AGENT_VERSION } from "@cm/protocol";
import { expect, it } from "vitest";
import { AGENT_VERSION } from "../src/version";

it("the agent built from this tree is the version its package and releases name, and the control plane asks nothing newer of it", () => {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string };
  expect(AGENT_VERSION).toBe(pkg.version);
  // An operator who installs this release must not see "upgrade recommended" beside it.
  expect(compareVersions(AGENT_VERSION, RECOMMENDED_AGENT_VERSION)).toBeGreaterThanOrEqual(0);
  expect(agentUpdateLevel(AGENT_VERSION)).toBe("none");
});
