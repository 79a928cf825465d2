import fs from "node:fs";
import { needs } from "@cm/testkit";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ensureBusyboxImage } from "../../agent/test/support/busybox-image";
import { DESKTOP, openConsole, PHONE, screenshots, seriousViolations, signIn, TestWalletKeys } from "./support/browser";
import { type DeploymentSystem, startDeploymentSystem } from "./support/deployment-system";

// A deployment's page in chromium, against a real control plane and a real agent running a real
// busybox container that prints a line every 200 ms and serves a page on port 8080: a tenant
// signed in with their wallet sees it running, its logs arrive live (pause, search), its
// endpoint answers, a shell in it answers, it stops and starts, and it is deleted after asking.

/** The container: a page for httpd, then a numbered line five times a second. */
const SCRIPT = [
  "mkdir -p /tmp/www && echo hello-from-the-console-test > /tmp/www/index.html",
  "httpd -p 8080 -h /tmp/www",
  "trap 'exit 0' TERM",
  'i=0; while true; do i=$((i+1)); echo "line $i"; sleep 0.2; done',
].join("; ");

const WAIT = { timeout: 45_000 };

needs("chromium", "docker", "busybox").describe("a deployment's page", () => {
  let stack: DeploymentSystem;
  const wallet = new TestWalletKeys();
  const problems: string[][] = [];

  beforeAll(async () => {
    ensureBusyboxImage();
    stack = await startDeploymentSystem();
  }, 120_000);
  afterAll(async () => {
    await stack?.close();
    // What the pages logged that a user would never want (a CSP refusal, an uncaught error).
    // Docker adding a container's network interface makes chromium drop requests in flight with
    // ERR_NETWORK_CHANGED: the machine's doing, not the page's; the SDK's streams resume after it.
    expect(problems.flat().filter((p) => !p.includes("net::ERR_NETWORK_CHANGED"))).toEqual([]);
  }, 60_000);

  /** The visitor signed in with the wallet, given credits; their token for making deployments as the deploy page would. */
  async function signedIn(path = "/", viewport?: { width: number; height: number }) {
    const visit = await openConsole(stack, { wallet, path, viewport });
    problems.push(visit.problems);
    await signIn(visit.page, wallet);
    const session = await visit.page.evaluate(() => JSON.parse(localStorage.getItem("cm.session") ?? "null"));
    await stack.harness.grantCredits(session.user.id, 1_000);
    return { ...visit, token: session.accessToken as string };
  }

  const create = async (token: string, body: Record<string, unknown>) => {
    const r = await stack.harness.call("POST", "/deployments", { token, body: { nodeId: stack.system.nodeId, customImage: ensureBusyboxImage(), ...body } });
    expect(r.status, r.text).toBe(201);
    return r.json.deployment.id as string;
  };
  const status = (page: Page) => page.locator(".deployment-status .badge").textContent();
  const lineTexts = (page: Page) => page.locator(".log-line").allTextContents();
  const lastLine = async (page: Page) => (await lineTexts(page)).at(-1);
  const numberOf = (line: string | undefined) => Number(line?.replace("line ", "") ?? Number.NaN);

  it("shows a running deployment live: logs (pause, search, download), endpoint, a terminal that resizes; stops, starts, and deletes after asking", async () => {
    const { page, context, token } = await signedIn();
    const id = await create(token, { name: "console web", ports: [8080], command: ["sh", "-c", SCRIPT] });

    await page.goto(`/app/deployments/${id}`);
    await page.getByRole("heading", { name: "console web", level: 1 }).waitFor();
    await expect.poll(() => status(page), WAIT).toBe("running");
    const timeline = page.locator(".timeline");
    await expect.poll(() => timeline.textContent()).toContain("running");
    expect(await page.locator(".deployment-facts").textContent()).toContain("$0.36/h while running");

    // Logs arrive live, numbered in order.
    await expect.poll(async () => numberOf(await lastLine(page)), WAIT).toBeGreaterThanOrEqual(3);
    const seenFirst = numberOf(await lastLine(page));
    await expect.poll(async () => numberOf(await lastLine(page)), WAIT).toBeGreaterThan(seenFirst + 2);
    const numbers = (await lineTexts(page)).map(numberOf);
    expect(numbers).toEqual(numbers.map((_, i) => numbers[0]! + i));

    // Pause freezes the view while lines keep coming; resume shows them.
    await page.getByRole("button", { name: "Pause" }).click();
    const frozenAt = await lastLine(page);
    await expect.poll(() => page.locator(".logs-state").textContent(), WAIT).toMatch(/[1-9]\d* new since paused/);
    expect(await lastLine(page)).toBe(frozenAt);
    await page.getByRole("button", { name: "Resume" }).click();
    await expect.poll(async () => numberOf(await lastLine(page)), WAIT).toBeGreaterThan(numberOf(frozenAt));

    // Search: only the matching lines, the match highlighted; nothing matching says so.
    await page.getByLabel("Search logs").fill("line 1");
    await expect.poll(async () => (await lineTexts(page)).every((t) => t.startsWith("line 1"))).toBe(true);
    expect(await page.locator(".log-line mark").first().textContent()).toBe("line 1");
    await page.getByLabel("Search logs").fill("no-such-line");
    await page.getByText("No line matches.").waitFor();
    await page.getByLabel("Search logs").fill("");

    // Download saves the lines loaded, as text.
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Download" }).click()]);
    expect(download.suggestedFilename()).toBe(`${id}-logs.txt`);
    const saved = fs.readFileSync(await download.path(), "utf8");
    expect(saved).toMatch(/^\S+ stdout line 1\n/);
    expect(saved.split("\n").length).toBeGreaterThan(5);

    // The endpoint: its URL shown, answering, and Open shows the container's page.
    const url = page.locator(".endpoint-url").first();
    await expect.poll(() => url.textContent(), WAIT).toMatch(/^http:\/\/[a-z2-7]+-8080\.localhost:\d+$/);
    await page.getByText("answering").waitFor(WAIT);
    const [opened] = await Promise.all([context.waitForEvent("page"), page.getByRole("link", { name: "Open port 8080 in a new tab" }).click()]);
    const served = async () => {
      await opened.reload();
      return opened.locator("body").textContent();
    };
    await expect.poll(served, WAIT).toContain("hello-from-the-console-test");
    await opened.close();

    // A shell in the container: type, read the answer.
    await page.getByRole("button", { name: "Open terminal" }).click();
    const screen = page.locator(".terminal-host .xterm-rows");
    await screen.waitFor(WAIT);
    await expect.poll(() => screen.textContent(), WAIT).toMatch(/[#$] ?\s*$/m);
    await page.locator(".terminal-host").click();
    await page.keyboard.type("echo hi-$((6*7))");
    await page.keyboard.press("Enter");
    await expect.poll(() => screen.textContent(), WAIT).toContain("hi-42");
    // A 24-bit colour is drawn in its colour (xterm styles such a cell inline, which the CSP must not refuse).
    await page.keyboard.type("printf '\\033[38;2;250;128;114m%s\\033[0m\\n' red-$((6*7))");
    await page.keyboard.press("Enter");
    const red = page.locator(".terminal-host .xterm-rows span", { hasText: /^red-42$/ });
    await red.waitFor(WAIT);
    expect(await red.evaluate((e) => getComputedStyle(e).color)).toBe("rgb(250, 128, 114)");
    // The tty takes the terminal's size, and a narrower window narrows it.
    const ttySize = async () => {
      await page.keyboard.type("stty size");
      await page.keyboard.press("Enter");
      await new Promise((r) => setTimeout(r, 300));
      const rows = await page.locator(".terminal-host .xterm-rows > div").allTextContents();
      const sizes = rows.map((r) => r.trim().match(/^(\d+) (\d+)$/)).filter((m) => m !== null);
      return Number(sizes.at(-1)?.[2] ?? 0);
    };
    const wideCols = await ttySize();
    expect(wideCols).toBeGreaterThan(60);
    await page.setViewportSize(PHONE);
    await expect.poll(ttySize, { ...WAIT, interval: 500 }).toBeLessThan(wideCols / 2);
    await page.setViewportSize(DESKTOP);

    expect(await seriousViolations(page)).toEqual([]);
    await screenshots(page, "deployment");

    // Stop, then start: the status and the timeline follow, and logs carry on after the start.
    await page.getByRole("button", { name: "Close terminal" }).click();
    await page.getByRole("button", { name: "Stop", exact: true }).click();
    await expect.poll(() => status(page), WAIT).toBe("stopped");
    await expect.poll(() => timeline.textContent()).toContain("stopped");
    expect(await page.getByRole("button", { name: "Open terminal" }).isDisabled()).toBe(true);
    const beforeStart = numberOf(await lastLine(page));
    await page.getByRole("button", { name: "Start", exact: true }).click();
    await expect.poll(() => status(page), WAIT).toBe("running");
    // The container's script counts from 1 again: a line below the one it stopped at is a new one.
    await expect.poll(async () => (await lineTexts(page)).some((t, i, all) => i > 0 && numberOf(t) < numberOf(all[i - 1])), WAIT).toBe(true);
    expect(beforeStart).toBeGreaterThan(3);

    // Delete asks first; Cancel keeps it; confirmed, it is gone.
    await page.getByRole("button", { name: "Delete…" }).click();
    const dialog = page.getByRole("dialog", { name: "Delete console web?" });
    await dialog.waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await dialog.waitFor({ state: "hidden" });
    expect((await stack.harness.call("GET", `/deployments/${id}`, { token })).status).toBe(200);
    await page.getByRole("button", { name: "Delete…" }).click();
    await dialog.getByRole("button", { name: "Delete deployment" }).click();
    await page.waitForURL(/\/app\/deployments$/, WAIT);
    expect((await stack.harness.call("GET", `/deployments/${id}`, { token })).status).toBe(404);
    await context.close();
  }, 150_000);

  it("says plainly why a deployment ended, and why a start was refused, on a phone", async () => {
    const { page, context, token } = await signedIn("/", PHONE);
    const id = await create(token, { name: "console exits", command: ["sh", "-c", "echo going; exit 3"] });
    await page.goto(`/app/deployments/${id}`);
    await expect.poll(() => status(page), WAIT).toBe("exited");
    await expect.poll(() => page.locator(".deployment-reason").textContent(), WAIT).toContain("code 3");
    await expect.poll(() => lineTexts(page), WAIT).toContain("going");
    expect(await page.getByRole("button", { name: "Start", exact: true }).isEnabled()).toBe(true);

    // A start the API refuses shows its message, its code and what to do.
    const maintenance = (enabled: boolean) =>
      stack.harness.call("POST", `/operator/nodes/${stack.system.nodeId}/maintenance`, { token: stack.system.operatorToken, body: { enabled } });
    expect((await maintenance(true)).status).toBe(200);
    try {
      await page.getByRole("button", { name: "Start", exact: true }).click();
      const refusal = page.locator(".deployment-actions").getByRole("alert");
      await expect.poll(() => refusal.textContent(), WAIT).toContain("NODE_IN_MAINTENANCE");
      expect(await refusal.textContent()).toContain("Pick another node");
      expect(await status(page)).toBe("exited");
      expect(await seriousViolations(page)).toEqual([]);
      await screenshots(page, "deployment-exited");
    } finally {
      await maintenance(false);
    }
    await context.close();
  });
  it("keeps drawing at 1,000 log lines a second: a bounded number of rows in the page, frames counted", async () => {
    const { page, context, token } = await signedIn();
    const id = await create(token, { name: "console burst", command: ["sh", "-c", "trap 'exit 0' TERM; while true; do seq 1 100; sleep 0.1; done"] });
    await page.goto(`/app/deployments/${id}`);
    await expect.poll(() => status(page), WAIT).toBe("running");
    const loaded = async () => Number((await page.locator(".logs-state").textContent())?.match(/(\d+) lines? loaded/)?.[1] ?? 0);
    await expect.poll(loaded, WAIT).toBeGreaterThan(500);
    // Frames the page drew over 3 s while the lines came, and how many came meanwhile.
    const before = await loaded();
    const frames = await page.evaluate(
      () =>
        new Promise<number>((resolve) => {
          let n = 0;
          const end = performance.now() + 3_000;
          const tick = (t: number) => {
            if (t >= end) return resolve(n);
            n++;
            requestAnimationFrame(tick);
          };
          requestAnimationFrame(tick);
        }),
    );
    const perSecond = ((await loaded()) - before) / 3;
    const rows = await page.locator(".log-line").count();
    console.log(`log view: ${perSecond.toFixed(0)} lines/s arriving, ${(frames / 3).toFixed(1)} frames/s, ${rows} rows in the page`);
    expect(rows).toBeLessThan(100);
    expect(frames / 3).toBeGreaterThanOrEqual(30);
    await context.close();
  }, 90_000);
});
