/**
 * The console in chromium against the whole product on one machine: a real control plane and
 * a real agent driving the real Docker engine (apps/control-plane/test/e2e/support/system.ts),
 * so a deployment's page shows a container that really runs, logs, serves and takes a shell.
 */
import fs from "node:fs";
import path from "node:path";
import { sqliteDatabase } from "@cm/testkit";
import { chromium } from "playwright-core";
import { ensureConsoleBuilt } from "../../../../scripts/console-build";
import { startSystem, until } from "../../../control-plane/test/e2e/support/system";
import type { ConsoleStack } from "./browser";

/** Debian's chromium, as browser.ts finds it (CHROMIUM_PATH, else on PATH): Playwright downloads no browser here. */
function chromiumPath(): string {
  if (process.env.CHROMIUM_PATH) return process.env.CHROMIUM_PATH;
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    const file = path.join(dir, "chromium");
    if (dir && fs.existsSync(file)) return file;
  }
  return "/usr/bin/chromium";
}

export type DeploymentSystem = ConsoleStack & { system: Awaited<ReturnType<typeof startSystem>> };

/** Builds the console if stale, starts a control plane, an agent for its one node (waited online) and chromium. */
export async function startDeploymentSystem(): Promise<DeploymentSystem> {
  await ensureConsoleBuilt();
  const system = await startSystem(sqliteDatabase);
  try {
    await system.agent().start();
    await until("node online", async () => (await system.h.call("GET", `/nodes/${system.nodeId}`)).json.node.status === "online");
    const browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, chromiumSandbox: process.getuid?.() !== 0 });
    return {
      system,
      harness: system.h,
      url: system.h.url,
      browser,
      close: async () => {
        await browser.close();
        await system.close();
      },
    };
  } catch (err) {
    await system.close();
    throw err;
  }
}
