import { expect, it } from "vitest";
import { agentInstallCommand } from "../src";

it("enrols a server from the release's installer, the token in the environment and never in an argument sudo or ps would show", () => {
  const line = agentInstallCommand("https://cm.example", "agt_secret");
  expect(line).toBe("AGENT_TOKEN=agt_secret sudo --preserve-env=AGENT_TOKEN bash install-cm-agent.sh --control-plane https://cm.example");
  // What runs as root (sudo's arguments onward) never holds the token.
  expect(line.slice(line.indexOf("sudo"))).not.toContain("agt_secret");
});
