// Where this checkout lives, so the unit can run the agent with absolute paths
// (systemd has no PATH worth trusting and no npm).
import { createRequire } from "node:module";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export interface AgentPaths {
  /** the node binary running now: the one npm ci built the repo's dependencies for */
  node: string;
  /** tsx's ESM loader, for `node --import` */
  tsxLoader: string;
  /** apps/agent/src/index.ts */
  entry: string;
  repoRoot: string;
  readme: string;
}

export function agentPaths(): AgentPaths {
  const here = dirname(fileURLToPath(import.meta.url));
  const repoRoot = resolve(here, "../../../..");
  return {
    node: process.execPath,
    tsxLoader: createRequire(import.meta.url).resolve("tsx"),
    entry: resolve(here, "../index.ts"),
    repoRoot,
    readme: resolve(here, "../../README.md"),
  };
}
