/**
 * The fixtures a browser test of the console asks for by name (vitest's test.extend, as
 * Playwright's own fixtures): `stack` (a control plane and chromium, one per file), `wallet` (a
 * test wallet's keys, new for each test), `visit` (a page of a new visitor with that wallet in
 * it) and `signedIn` (the same, signed in). Each page's context is closed after its test, and the
 * test fails when the page logged an error (a CSP refusal, an uncaught exception).
 *
 * A file that needs another control plane (an agent, other settings) overrides `stack` alone, e.g.
 * `consoleTest.extend({ stack: [async ({}, use) => { const s = await startConsoleStack({ config }); await use(s); await s.close(); }, { scope: "file" }] })`,
 * or builds it with consoleStackOn over a control plane started its own way.
 */
import { expect, test } from "vitest";
import { type ConsolePage, type ConsoleStack, openConsole, signIn, startConsoleStack, TestWalletKeys } from "./browser";

type Visit = (path?: string, o?: { viewport?: { width: number; height: number }; wallet?: TestWalletKeys | false }) => Promise<ConsolePage>;

export const consoleTest = test.extend<{ stack: ConsoleStack; wallet: TestWalletKeys; visit: Visit; signedIn: ConsolePage }>({
  stack: [
    // biome-ignore lint/correctness/noEmptyPattern: vitest reads which fixtures a fixture needs from this pattern; this one needs none
    async ({}, use) => {
      const stack = await startConsoleStack();
      await use(stack);
      await stack.close();
    },
    { scope: "file" },
  ],
  // biome-ignore lint/correctness/noEmptyPattern: as above
  wallet: async ({}, use) => use(new TestWalletKeys()),
  visit: async ({ stack, wallet }, use) => {
    const opened: ConsolePage[] = [];
    await use(async (path, o = {}) => {
      const visit = await openConsole(stack, { path, viewport: o.viewport, wallet: o.wallet === false ? undefined : (o.wallet ?? wallet) });
      opened.push(visit);
      return visit;
    });
    for (const v of opened) {
      await v.context.close();
      expect(v.problems, "errors the page logged").toEqual([]);
    }
  },
  signedIn: async ({ visit, wallet }, use) => {
    const v = await visit("/");
    await signIn(v.page, wallet);
    await use(v);
  },
});
