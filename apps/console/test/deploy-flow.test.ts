import { needs } from "@cm/testkit";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type ConsolePage, openConsole, PHONE, screenshots, seriousViolations, signIn, TestWalletKeys } from "./support/browser";
import { type DeployStack, startDeployStack, TEST_TEMPLATE } from "./support/deploy-stack";

// The deploy flow and the deployments list in chromium, against a control plane with a real
// agent running containers in Docker: a tenant with credits deploys a template and an image
// through the form and watches both reach running in the list; a tenant asking for a GPU no
// node has reads why no node fits; one without credits is sent to the Credits page.

/** Long enough for a loaded 2-core machine: each wait is for what appears, never a sleep. */
const SEEN_MS = 20_000;

needs("chromium", "docker", "busybox").describe("deploying from the web console", () => {
  let stack: DeployStack;
  const opened: ConsolePage[] = [];

  beforeAll(async () => {
    stack = await startDeployStack();
  }, 120_000);

  afterAll(async () => {
    for (const v of opened) await v.context.close();
    await stack?.close();
    // What a user would never want to see: an uncaught error, a CSP refusal.
    expect(opened.flatMap((v) => v.problems)).toEqual([]);
  }, 60_000);

  async function signedIn(path: string, credits: number): Promise<{ page: Page; wallet: TestWalletKeys }> {
    const wallet = new TestWalletKeys();
    const v = await openConsole(stack, { wallet, path: "/" });
    opened.push(v);
    await signIn(v.page, wallet);
    const userId = await v.page.evaluate(() => JSON.parse(localStorage.getItem("cm.session") ?? "null")?.user?.id as string);
    if (credits > 0) await stack.grant(userId, credits);
    await v.page.goto(`/app${path}`);
    return { page: v.page, wallet };
  }

  /** Submits the form once the estimate says it fits; resolves with the id of the deployment's page it went to. */
  async function deploy(page: Page): Promise<string> {
    await page.getByText("It fits: deploying now runs it there.").waitFor({ timeout: SEEN_MS });
    await page.getByRole("button", { name: "Deploy", exact: true }).click();
    await page.waitForURL(/\/app\/deployments\/[^/?]+$/, { timeout: SEEN_MS });
    return decodeURIComponent(new URL(page.url()).pathname.split("/").pop()!);
  }

  it("deploys a template and a custom image through the form, and the list shows both running with their cost", async () => {
    // From the templates page, as a tenant browses to it.
    const { page } = await signedIn(`/templates?search=${encodeURIComponent(TEST_TEMPLATE.name)}`, 1_000);
    await page.getByRole("link", { name: `Deploy ${TEST_TEMPLATE.name}` }).click();
    await page.getByRole("heading", { name: "Deploy", exact: true }).waitFor();
    expect(await page.getByLabel("Template", { exact: true }).inputValue()).toBe(TEST_TEMPLATE.slug);
    // The estimate against the balance: the node's rate, the hour it holds, the credits granted.
    const estimate = page.getByRole("region", { name: "Estimate" });
    await estimate.getByText("36 credits (one hour)").waitFor({ timeout: SEEN_MS });
    await estimate.getByText("1000 credits available").waitFor({ timeout: SEEN_MS });
    await page.getByLabel("Variable 1 name").fill("MODE");
    await page.getByLabel("Variable 1 value").fill("console");
    await page.getByRole("button", { name: "Add variable" }).click();
    await page.getByLabel("Variable 2 name").fill("DROPPED");
    await page.getByRole("button", { name: "Remove variable 2" }).click();
    expect(await seriousViolations(page)).toEqual([]);
    await screenshots(page, "deploy");
    const templateDeployment = await deploy(page);

    // A custom image, on the node picked in the catalogue, with a command and resources.
    await page.goto("/app/nodes");
    await page.getByRole("link", { name: "Deploy here, on e2e" }).click();
    await page.getByRole("heading", { name: "Deploy", exact: true }).waitFor();
    expect(await page.getByLabel("A node I pick").isChecked()).toBe(true);
    expect(await page.getByLabel("Node", { exact: true }).inputValue()).toBe(stack.nodeId);
    await page.getByLabel("A container image").check();
    await page.getByLabel("Image", { exact: true }).fill(stack.busybox);
    await page.getByLabel("Name (optional)").fill("ticker");
    await page.getByLabel("CPU cores").fill("0.2");
    await page.getByLabel("Memory (MB)").fill("128");
    await page.getByLabel("Command (optional)").fill(`sh -c "while true; do echo tick; sleep 1; done"`);
    await page.getByLabel("TCP ports").fill("9000");
    const imageDeployment = await deploy(page);

    // What was created is what the form said.
    const token = await page.evaluate(() => JSON.parse(localStorage.getItem("cm.session") ?? "null").accessToken as string);
    const get = async (id: string) => (await stack.harness.call("GET", `/deployments/${id}`, { token })).json.deployment;
    const fromTemplate = await get(templateDeployment);
    expect(fromTemplate.templateId).toBe(TEST_TEMPLATE.id);
    expect(fromTemplate.env).toMatchObject({ GREETING: "hello", MODE: "console" });
    expect(fromTemplate.env.DROPPED).toBeUndefined();
    const fromImage = await get(imageDeployment);
    expect(fromImage).toMatchObject({
      name: "ticker",
      nodeId: stack.nodeId,
      image: stack.busybox,
      command: ["sh", "-c", "while true; do echo tick; sleep 1; done"],
      cpuCores: 0.2,
      memoryMb: 128,
      tcpPorts: [9000],
    });

    // The list: both, live, to running, each linking to its page.
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Deployments" }).click();
    const row = (id: string) => page.locator(`[data-deployment-id="${id}"]`);
    for (const id of [templateDeployment, imageDeployment])
      await expect.poll(() => row(id).locator(".dep-status").textContent(), { timeout: 60_000, message: `${id} running` }).toBe("running");
    expect(await row(imageDeployment).getByRole("link", { name: "ticker" }).getAttribute("href")).toBe(`/app/deployments/${imageDeployment}`);
    // Cost so far grows as metering charges it (every second here), without a reload.
    await expect.poll(() => row(imageDeployment).locator(".deployment-cost").textContent(), { timeout: SEEN_MS }).not.toBe("$0.00");

    await page.getByLabel("Status").selectOption("failed");
    await page.getByText("No deployment is failed.").waitFor();
    await page.getByLabel("Status").selectOption("running");
    await expect.poll(() => page.locator(".deployment-row").count()).toBe(2);
    expect(new URL(page.url()).search).toBe("?status=running");
    expect(await seriousViolations(page)).toEqual([]);
    await screenshots(page, "deployments");
  });

  it("says why no node fits an impossible request, and sends a tenant short of credits to the Credits page", async () => {
    const { page } = await signedIn(`/deploy?template=${TEST_TEMPLATE.slug}`, 0);
    await page.getByRole("heading", { name: "Deploy", exact: true }).waitFor();
    const estimate = page.getByRole("region", { name: "Estimate" });

    // No credits: the API's INSUFFICIENT_CREDITS, its message, and where to buy them.
    await estimate.locator('[data-code="INSUFFICIENT_CREDITS"]').waitFor({ timeout: SEEN_MS });
    expect(await estimate.textContent()).toMatch(/credit/i);
    expect(await estimate.getByRole("link", { name: "Buy credits" }).getAttribute("href")).toBe("/app/credits");
    // Deploying anyway answers the same, as an alert.
    await page.getByRole("button", { name: "Deploy", exact: true }).click();
    const alert = page.getByRole("alert").filter({ hasText: "INSUFFICIENT_CREDITS" });
    await alert.waitFor({ timeout: SEEN_MS });
    expect(await alert.getByRole("link", { name: "Buy credits" }).count()).toBe(1);
    expect(await seriousViolations(page)).toEqual([]);
    await screenshots(page, "deploy-short-credits");

    // A GPU no online node has: the reasons, counted.
    await page.getByLabel("GPU model").fill("H100");
    const refusal = estimate.locator('[data-code="NO_NODE_FITS"]');
    await refusal.waitFor({ timeout: SEEN_MS });
    expect(await refusal.textContent()).toContain("has no H100 GPU");
    expect(await refusal.getByRole("list", { name: "Why no node fits" }).getByRole("listitem").allTextContents()).toEqual(["1 node without that GPU model"]);
    expect(await estimate.getByText("none fits").count()).toBe(1);
    await page.setViewportSize(PHONE);
    expect(await seriousViolations(page)).toEqual([]);
    await screenshots(page, "deploy-none-fits");
  });
});
