import { needs } from "@cm/testkit";
import { expect } from "vitest";
import { ensureBusyboxImage } from "../../agent/test/support/busybox-image";
import { PHONE, screenshots, seriousViolations } from "./support/browser";
import { parseInstallCommand, startAgentFromCommand, operatorTest as test } from "./support/operator-stack";

// An operator in chromium against a real control plane: adds a node, copies the one install line
// the page shows once, a real agent with Docker started from that line brings the node online in
// the open page; maintenance on and off; a new price; a tenant's deployment runs there and earns;
// a payout is refused past what is available, then requested.

needs("chromium", "docker", "busybox").describe("the operator pages in a browser", () => {
  test("adds a node, sees it come online from the shown command, runs maintenance and a price change, and requests a payout", async ({ signedIn, stack }) => {
    const { page } = signedIn;
    const h = stack.harness;
    const image = ensureBusyboxImage();
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Operator", exact: true }).click();
    await page.getByText("You operate no nodes yet").waitFor();
    expect(await seriousViolations(page)).toEqual([]);

    // Add a node: the page shows the release's install line with its token, once.
    await page.getByLabel("Node name").fill("rig-1");
    await page.getByLabel("Region").selectOption("eu-west");
    await page.getByLabel("Country").fill("de");
    await page.getByLabel("Price (credits per GPU-hour)").fill("80");
    await page.getByRole("button", { name: "Add node" }).click();
    const command = (await page.locator(".install-command").textContent({ timeout: 15_000 }))!;
    const { token, controlPlaneUrl } = parseInstallCommand(command);
    expect(token).toMatch(/^cmn_/);
    expect(controlPlaneUrl).toBe(stack.url);
    expect(await page.getByText("Shown once:").count()).toBe(1);
    await page.getByText("Waiting for rig-1 to come online").waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await screenshots(page, "operator-add-node");

    // The GPU server runs that line: its agent enrols with the token alone, and the open page sees it online.
    const agent = await startAgentFromCommand(command);
    try {
      await page.getByText("rig-1 is online").waitFor({ timeout: 30_000 });
      const card = page.locator(".operator-node", { hasText: "rig-1" });
      await expect.poll(() => card.locator(".badge.status-online").count(), { timeout: 10_000 }).toBe(1);
      expect(await card.textContent()).not.toContain("no agent has connected yet");
      // Shown once: leaving the panel forgets the token.
      await page.getByRole("button", { name: "Done" }).click();
      expect(await page.locator(".install-command").count()).toBe(0);

      await page.getByRole("link", { name: "rig-1", exact: true }).click();
      await page.getByRole("heading", { level: 1, name: "rig-1" }).waitFor();
      const nodeId = new URL(page.url()).pathname.split("/").pop()!;

      // Maintenance on: the badge and the reason; then off.
      await page.getByLabel("Reason shown to tenants (optional)").fill("swapping a fan");
      await page.getByRole("button", { name: "Start maintenance" }).click();
      await page.getByText("In maintenance: it takes no new deployments").waitFor();
      await expect.poll(() => page.locator(".node-head .badge").textContent()).toBe("maintenance");
      await page
        .getByText(/swapping a fan/)
        .first()
        .waitFor();
      const shown = await h.call("GET", `/nodes/${nodeId}`);
      expect(shown.json.node).toMatchObject({ status: "maintenance", maintenanceReason: "swapping a fan" });
      await page.getByRole("button", { name: "End maintenance" }).click();
      await page.getByText("Maintenance ended").waitFor();
      await expect.poll(() => page.locator(".node-head .badge").textContent(), { timeout: 10_000 }).toBe("online");

      // A new price: 36,000 credits an hour, 10 a second, so a few seconds of running earn enough to pay out.
      await page.getByLabel("Price (credits per GPU-hour)").fill("36000");
      await page.getByRole("button", { name: "Change price" }).click();
      await page.getByText(/Now \$360(\.00)?\/h per GPU/).waitFor();
      expect((await h.call("GET", `/nodes/${nodeId}`)).json.node.hourlyRateCents).toBe(36_000);

      // A tenant's deployment runs there: the node's page lists it.
      const tenant = await h.signIn();
      await h.grantCredits(tenant.user.id, 100_000);
      const created = await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId, customImage: image, command: ["sleep", "600"] } });
      expect(created.status, created.text).toBe(201);
      const deploymentId = created.json.deployment.id as string;
      const row = page.locator("tr", { hasText: deploymentId });
      await expect.poll(() => row.textContent(), { timeout: 45_000 }).toContain("running");
      expect(await seriousViolations(page)).toEqual([]);
      await screenshots(page, "operator-node");

      // Earned, metered on real time: wait for something available, then stop the deployment so it stops moving.
      const operatorToken = await page.evaluate(() => JSON.parse(localStorage.getItem("cm.session")!).accessToken as string);
      const earnings = async () => (await h.call("GET", "/operator/earnings", { token: operatorToken })).json.earnings;
      await expect.poll(async () => (await earnings()).available, { timeout: 30_000, message: "available earnings" }).toBeGreaterThanOrEqual(20);
      await h.call("POST", `/deployments/${deploymentId}/stop`, { token: tenant.token });
      await expect.poll(() => row.textContent(), { timeout: 30_000 }).toMatch(/stopp/);
      const available = (await earnings()).available as number;

      await page.getByRole("link", { name: "← All your nodes" }).click();
      await page.getByRole("heading", { name: "Earnings and payouts" }).waitFor();
      await expect
        .poll(() => page.locator(".earnings").textContent(), { timeout: 15_000 })
        .toContain(`${available.toLocaleString("en-US", { maximumFractionDigits: 2 })} credits`);

      // More than is available: the API's refusal and what to do next.
      const amount = page.getByLabel("Amount (credits)");
      await amount.fill(String(Math.ceil(available) + 1000));
      await page.getByRole("button", { name: "Request payout" }).click();
      const refusal = page.locator(".payout-form [role=alert]");
      await expect.poll(() => refusal.textContent(), { timeout: 15_000 }).toContain("INSUFFICIENT_EARNINGS");
      expect(await refusal.textContent()).toContain("are available to pay out");

      // Ten credits: requested, waiting for an administrator (PAYOUTS=manual), and listed.
      await amount.fill("10");
      await page.getByRole("button", { name: "Request payout" }).click();
      await page.getByText(/Payout of 10 credits \(0\.1 USDC\) requested/).waitFor({ timeout: 15_000 });
      expect(await page.locator(".payout-form [role=alert]").count()).toBe(0);
      await page.locator("table.payouts tbody tr", { hasText: "requested" }).waitFor();
      await expect.poll(() => page.locator(".earnings").textContent()).toMatch(/Paying out\s*10 credits/);
      const payouts = (await h.call("GET", "/operator/payouts", { token: operatorToken })).json.payouts;
      expect(payouts).toMatchObject([{ status: "requested", amountCredits: 10 }]);
      expect(await seriousViolations(page)).toEqual([]);
      await screenshots(page, "operator");

      // On a phone the same page holds: nothing wider than the screen.
      await page.setViewportSize(PHONE);
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(PHONE.width);
    } finally {
      await agent.close();
    }
    // About a minute here alone; the loaded 2-core machine with other browsers running takes longer.
  }, 150_000);
});
