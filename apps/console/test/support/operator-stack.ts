/**
 * What the operator pages' browser test needs beyond the console stack: a control plane that
 * pays out and meters on real time (the shared stack's clock stands still, so nothing would be
 * earned), and a real agent with Docker started from the install command the page shows, as
 * the release's installer would start it on a GPU server.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import nacl from "tweetnacl";
import { test as base, expect } from "vitest";
import { type Agent, createAgent } from "../../../agent/src/agent";
import { systemClock as agentClock } from "../../../agent/src/clock";
import { parseAgentConfig } from "../../../agent/src/config";
import { wsSocketFactory } from "../../../agent/src/connection/socket";
import { SystemHostProbe } from "../../../agent/src/host/probe";
import { createLogger } from "../../../agent/src/logger";
import { DockerRuntime } from "../../../agent/src/runtime/docker-runtime";
import { systemClock } from "../../../control-plane/src/services/ids";
import { removeLabelled } from "../../../control-plane/test/e2e/support/system";
import { type ConsolePage, type ConsoleStack, openConsole, signIn, startConsoleStack, TestWalletKeys } from "./browser";

/** A payout key file as the Solana CLI writes it (64 numbers), readable by its owner only: the control plane refuses others. */
function payoutKeyFile(): string {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), "cm-console-payout-")), "hot.json");
  writeFileSync(file, JSON.stringify(Array.from(nacl.sign.keyPair().secretKey)));
  chmodSync(file, 0o600);
  return file;
}

/**
 * The console stack with payouts on (PAYOUTS=manual: a request waits for an administrator, so
 * nothing is sent and no RPC is needed), earnings available at once, and the meter on the
 * system clock at a second: a deployment running a few seconds earns something to pay out.
 */
export function startOperatorStack(): Promise<ConsoleStack> {
  return startConsoleStack({
    config: {
      PAYOUT_KEYPAIR: payoutKeyFile(),
      EARNINGS_HOLD_HOURS: 0,
      PAYOUT_MIN_CREDITS: 10,
      METER_INTERVAL_MS: 1_000,
      // A stall of a few seconds on a loaded 2-core machine must not read as a lost node.
      HEARTBEAT_INTERVAL_MS: 3_000,
      ACCESS_TOKEN_TTL_S: 3600,
    },
    overrides: { clock: systemClock },
  });
}

/** The token and control plane in the release's install line (agentInstallCommand); fails the test when the line is not that. */
export function parseInstallCommand(command: string): { token: string; controlPlaneUrl: string } {
  const m = /^AGENT_TOKEN=(\S+) sudo --preserve-env=AGENT_TOKEN bash install-cm-agent\.sh --control-plane (\S+)$/.exec(command.trim());
  if (!m) throw new Error(`not the release's install line: ${command}`);
  return { token: m[1]!, controlPlaneUrl: m[2]! };
}

/**
 * A real agent driving Docker, configured as install-cm-agent.sh configures the service from the
 * line (its AGENT_TOKEN and --control-plane), in this process. Its containers carry a label of
 * this run, removed by close(). Resolves once it is started (connecting).
 */
export async function startAgentFromCommand(command: string): Promise<{ agent: Agent; close(): Promise<void> }> {
  const { token, controlPlaneUrl } = parseInstallCommand(command);
  const runLabel = `console-${randomBytes(4).toString("hex")}`;
  const logger = createLogger({ level: "warn", write: () => undefined });
  const runtime = new DockerRuntime({ logger });
  const agent = createAgent(
    parseAgentConfig({
      controlPlaneUrl,
      token,
      containerLabels: { "cm.test-run": runLabel },
      timing: { backoffInitialMs: 50, backoffMaxMs: 500, pingIntervalMs: 500, pongTimeoutMs: 5_000, containerStopTimeoutS: 2 },
    }),
    { runtime, hostProbe: new SystemHostProbe({ dockerEngine: () => runtime.engineInfo() }), socketFactory: wsSocketFactory(), clock: agentClock, logger },
  );
  await agent.start();
  return {
    agent,
    close: async () => {
      await agent.stop().catch(() => undefined);
      await removeLabelled(`cm.test-run=${runLabel}`);
    },
  };
}

/**
 * The operator test's fixtures: `stack` (startOperatorStack, one per file) and `signedIn` (a page
 * of a new visitor whose test wallet signed in). Not console-test.ts's extended: vitest keeps a
 * fixture's dependants on the original when a later extend replaces it, so its `signedIn` would
 * open the shared stack.
 */
export const operatorTest = base.extend<{ stack: ConsoleStack; wallet: TestWalletKeys; signedIn: ConsolePage }>({
  stack: [
    // biome-ignore lint/correctness/noEmptyPattern: vitest reads which fixtures a fixture needs from this pattern; this one needs none
    async ({}, use) => {
      const stack = await startOperatorStack();
      await use(stack);
      await stack.close();
    },
    { scope: "file" },
  ],
  // biome-ignore lint/correctness/noEmptyPattern: as above
  wallet: async ({}, use) => use(new TestWalletKeys()),
  signedIn: async ({ stack, wallet }, use) => {
    const visit = await openConsole(stack, { path: "/", wallet });
    await signIn(visit.page, wallet);
    await use(visit);
    await visit.context.close();
    expect(visit.problems, "errors the page logged").toEqual([]);
  },
});
