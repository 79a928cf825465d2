/**
 * The console in chromium against the whole product on one machine: the control plane (the
 * e2e suite's startSystem: real socket, system clock, metering every second) with a real agent
 * in this process driving the real Docker engine, one online node, and a template whose image
 * is local (no registry is reachable here). What the deploy flow's browser test needs beyond
 * browser.ts's stack, which has no agent.
 */
import { sqliteDatabase } from "@cm/testkit";
import { chromium } from "playwright-core";
import { ensureConsoleBuilt } from "../../../../scripts/console-build";
import { ensureBusyboxImage } from "../../../agent/test/support/busybox-image";
import { startSystem, until } from "../../../control-plane/test/e2e/support/system";
import { ensureWebImage } from "../../../control-plane/test/e2e/support/web-image";
import { CHROMIUM, type ConsoleStack } from "./browser";

/** A template of the catalogue for the test: the e2e web image (node serving HTTP on 8080), light enough for a 2-core machine. */
export const TEST_TEMPLATE = {
  id: "tpl_console_test_web",
  slug: "console-test-web",
  name: "Console test web server",
  category: "utility" as const,
  description: "A small HTTP server on port 8080, for the console's browser tests.",
  requiresGpu: false,
  minGpuVramMb: 0,
  defaultEnv: { GREETING: "hello" },
  ports: [{ internal: 8080, protocol: "http", description: "Web" }],
  minCpuCores: 0,
  minRamMb: 64,
  minDiskGb: 1,
  estimatedPullTimeS: 1,
  sortOrder: 1000,
};

export interface DeployStack extends ConsoleStack {
  nodeId: string;
  /** The busybox image: no CMD, so a deployment of it gives a command. */
  busybox: string;
  /** Credits a user as the admin command does. */
  grant(userId: string, credits: number): Promise<void>;
}

export async function startDeployStack(): Promise<DeployStack> {
  await ensureConsoleBuilt();
  const busybox = ensureBusyboxImage();
  const web = ensureWebImage();
  const system = await startSystem(sqliteDatabase);
  try {
    const h = system.h;
    await h.deps.repos.templates.seed([{ ...TEST_TEMPLATE, containerImage: web }]);
    await system.agent().start();
    await until(
      "the node online",
      async () => (await h.call("GET", `/nodes/${system.nodeId}`)).json.node.status === "online",
      30_000,
      async () => system.agentLog(),
    );
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, chromiumSandbox: process.getuid?.() !== 0 });
    return {
      harness: h,
      url: h.url,
      browser,
      nodeId: system.nodeId,
      busybox,
      grant: (userId, credits) => h.grantCredits(userId, credits),
      close: async () => {
        await browser.close();
        await system.close();
      },
    };
  } catch (e) {
    await system.close();
    throw e;
  }
}
