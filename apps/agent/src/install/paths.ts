// Where this checkout lives, so the unit can run the agent with absolute paths
// (systemd has no PATH worth trusting and no npm).
import { createRequire } from "node:module";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export interface AgentPaths {
  /** the node binary running now: the one npm ci built the repo's dependencies for */
  node: string;
  /** tsx's ESM loader, for `node --import`; none for the built agent, which node runs alone */
  tsxLoader?: string;
  /** apps/agent/src/index.ts, or the built agent's one file (npm run build, a release's lib/cm-agent.mjs) */
  entry: string;
  repoRoot: string;
  readme: string;
}

export function agentPaths(moduleUrl: string = import.meta.url): AgentPaths {
  const self = fileURLToPath(moduleUrl);
  const here = dirname(self);
  // Bundled, this module is the agent's one file: there is no tsx beside it to load (a release has none).
  if (!self.endsWith(".ts")) return { node: process.execPath, entry: self, repoRoot: dirname(here), readme: resolve(here, "../README.md") };
  const repoRoot = resolve(here, "../../../..");
  return {
    node: process.execPath,
    tsxLoader: createRequire(import.meta.url).resolve("tsx"),
    entry: resolve(here, "../index.ts"),
    repoRoot,
    readme: resolve(here, "../../README.md"),
  };
}
