/**
 * The console in a real browser against a real control plane: Debian's chromium driven by
 * playwright-core, the control plane on port 0 serving the console as built (apps/console/dist,
 * rebuilt first when stale), and a Wallet Standard test wallet in each page that signs with a
 * real ed25519 keypair the test holds. Tests ask for these through the fixtures in
 * console-test.ts; this file is the machinery.
 */
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { AxeBuilder } from "@axe-core/playwright";
import { walletAddress } from "@cm/sdk";
import { sqliteDatabase } from "@cm/testkit";
import { build } from "esbuild";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import nacl from "tweetnacl";
import { ensureConsoleBuilt } from "../../../../scripts/console-build";
import type { Config } from "../../../control-plane/src/config";
import type { DepsOverrides } from "../../../control-plane/src/deps";
import { type Harness, startHarness, TestClock } from "../../../control-plane/test/support/harness";

const HERE = path.dirname(fileURLToPath(import.meta.url));
/** Debian's chromium as the testkit's probe finds it, on PATH (apt-get install chromium; .ci/run installs it): Playwright downloads no browser here. */
function chromiumPath(): string {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    const file = path.join(dir, "chromium");
    if (dir && fs.existsSync(file)) return file;
  }
  return "/usr/bin/chromium";
}
export const CHROMIUM = chromiumPath();
/** Screenshots land here (gitignored), for a person or CI's artifacts to look at. */
export const ARTIFACTS = path.resolve(HERE, "../../test-artifacts");

export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

export interface ConsoleStack {
  harness: Harness;
  /** The control plane's origin; the console is at `${url}/app/`. */
  url: string;
  browser: Browser;
  close(): Promise<void>;
}

/** A headless chromium (the sandbox off as root: CI and containers cannot use it). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, chromiumSandbox: process.getuid?.() !== 0 });
}

/**
 * Builds the console if stale, starts a control plane on port 0 (the harness's, with `config` and
 * `overrides`; its clock is the browser's unless `overrides` gives one: the SDK in the page
 * refreshes tokens by their expiry) and a headless chromium.
 */
export async function startConsoleStack(o: { config?: Partial<Config>; overrides?: DepsOverrides } = {}): Promise<ConsoleStack> {
  await ensureConsoleBuilt();
  const harness = await startHarness(sqliteDatabase, { config: o.config, overrides: { clock: new TestClock(Date.now()), ...o.overrides } });
  return consoleStackOn(harness, () => harness.close());
}

/** The stack over a control plane started some other way (the e2e suite's startSystem, with an agent): the console built, a browser added. */
export async function consoleStackOn(harness: Harness, closeServer: () => Promise<void>): Promise<ConsoleStack> {
  try {
    await ensureConsoleBuilt();
    const browser = await launchChromium();
    return {
      harness,
      url: harness.url,
      browser,
      close: async () => {
        await browser.close();
        await closeServer();
      },
    };
  } catch (e) {
    await closeServer();
    throw e;
  }
}

/** The keypair behind a test wallet: what a person's wallet extension would hold. `refuse` makes it say no, as its user could. */
export class TestWalletKeys {
  readonly name: string;
  readonly keypair = nacl.sign.keyPair();
  readonly address = walletAddress(this.keypair.publicKey);
  refuse = false;
  /** Whether the user connected it to the console before: a silent connect (after a reload) succeeds only then. */
  trusted = false;
  /** The messages it signed, as text: the sign-in message, which a test can read. */
  readonly signed: string[] = [];

  constructor(name = "Test Wallet") {
    this.name = name;
  }

  sign(message: number[]): number[] {
    if (this.refuse) throw new Error("User rejected the request.");
    const bytes = Uint8Array.from(message);
    this.signed.push(new TextDecoder().decode(bytes));
    return Array.from(nacl.sign.detached(bytes, this.keypair.secretKey));
  }
}

const pageScripts = new Map<string, Promise<string>>();
/** A wallet module of this folder (test-wallet.ts, paying-wallet.ts) with @wallet-standard/wallet, as one script for the page; built once a run. */
export function walletScript(file: string): Promise<string> {
  let script = pageScripts.get(file);
  if (!script) {
    script = build({
      entryPoints: [path.join(HERE, file)],
      bundle: true,
      write: false,
      format: "iife",
      target: "es2022",
      logLevel: "silent",
    }).then((r) => r.outputFiles[0]!.text);
    pageScripts.set(file, script);
  }
  return script;
}

export interface ConsolePage {
  page: Page;
  context: BrowserContext;
  /** What the page reported that a user would never want: uncaught errors, console errors (a CSP refusal is one). */
  problems: string[];
}

/**
 * A new browser context (its own storage: a new visitor) with `wallet` registered in every page
 * it opens, and a page at the console's `path` ("/nodes").
 */
export async function openConsole(
  stack: ConsoleStack,
  o: { wallet?: TestWalletKeys; path?: string; viewport?: { width: number; height: number } } = {},
): Promise<ConsolePage> {
  const context = await stack.browser.newContext({ viewport: o.viewport ?? DESKTOP, baseURL: stack.url });
  if (o.wallet) {
    const wallet = o.wallet;
    await context.exposeFunction("cmTestWalletSign", (message: number[]) => wallet.sign(message));
    await context.exposeFunction("cmTestWalletTrusted", () => wallet.trusted);
    await context.exposeFunction("cmTestWalletTrust", () => {
      wallet.trusted = true;
    });
    const identity = { name: wallet.name, address: wallet.address, publicKey: Array.from(wallet.keypair.publicKey) };
    await context.addInitScript({ content: `window.cmTestWallet = ${JSON.stringify(identity)};\n${await walletScript("test-wallet.ts")}` });
  }
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`uncaught: ${e.message}`));
  page.on("console", (m) => {
    // A 4xx the page shows as an error is the console doing its job; the browser logs it too.
    if (m.type() === "error" && !/Failed to load resource: the server responded with a status of 4\d\d/.test(m.text())) problems.push(m.text());
  });
  await page.goto(`/app${o.path ?? "/"}`);
  return { page, context, problems };
}

/** Signs in from the header as a person would: "Sign in", the wallet's button, the wallet signs; resolves once the address shows. */
export async function signIn(page: Page, wallet: TestWalletKeys): Promise<void> {
  await page.getByRole("banner").getByRole("link", { name: "Sign in", exact: true }).click();
  await page.getByRole("button", { name: wallet.name }).click();
  await page.getByRole("button", { name: "Sign out" }).waitFor();
}

/** axe-core on the page as it is: fails with each serious or critical violation, its rule and where. */
export async function seriousViolations(page: Page): Promise<string[]> {
  // WCAG 2.1 A and AA, contrast included; axe's best-practice rules are advice, and scanning them doubles the time on every page.
  const result = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]).analyze();
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(" ")).join(", ")})`);
}

/** The page at desktop and phone sizes, as test-artifacts/<name>-desktop.png and -phone.png. */
export async function screenshots(page: Page, name: string): Promise<void> {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const before = page.viewportSize() ?? DESKTOP;
  for (const [size, viewport] of [
    ["desktop", DESKTOP],
    ["phone", PHONE],
  ] as const) {
    await page.setViewportSize(viewport);
    await page.screenshot({ path: path.join(ARTIFACTS, `${name}-${size}.png`), fullPage: true });
  }
  await page.setViewportSize(before);
}
