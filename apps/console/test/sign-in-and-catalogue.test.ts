import { needs } from "@cm/testkit";
import { expect } from "vitest";
import { PHONE, screenshots, seriousViolations } from "./support/browser";
import { consoleTest as test } from "./support/console-test";

// The console in chromium against a real control plane: a person with a wallet signs in, stays
// signed in across a reload, browses and filters the catalogue and the templates, and signs out.

needs("chromium").describe("the web console in a browser", () => {
  test("connects a wallet, signs in, stays signed in across a reload, and signs out, revoking the session", async ({ visit, wallet, stack }) => {
    const { page } = await visit("/");
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole("banner").getByRole("link", { name: "Sign in", exact: true }).click();
    await page.getByRole("heading", { name: "Sign in with a Solana wallet" }).waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await screenshots(page, "sign-in");

    await page.getByRole("button", { name: wallet.name }).click();
    await page.getByText(`Signed in as ${wallet.address}`).waitFor();
    // The wallet signed the API's own sign-in message; the key stayed with it.
    expect(wallet.signed).toHaveLength(1);
    expect(wallet.signed[0]).toContain("wants you to sign in with your Solana account");

    await page.reload();
    await page.getByRole("button", { name: "Sign out" }).waitFor();
    const stored = await page.evaluate(() => JSON.parse(localStorage.getItem("cm.session") ?? "null"));
    expect(stored.user.walletAddress).toBe(wallet.address);
    expect(wallet.signed).toHaveLength(1); // the reload asked the wallet to sign nothing
    // The wallet that signed in is connected again without asking (it trusts the site), for the pages that need it to pay.
    await expect.poll(() => page.locator(".wallet-button .address").getAttribute("title")).toBe(`${wallet.address}, connected with ${wallet.name}`);

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("banner").getByRole("link", { name: "Sign in", exact: true }).waitFor();
    expect(await page.evaluate(() => localStorage.getItem("cm.session"))).toBeNull();
    // Revoked on the API, not only forgotten here.
    const refresh = await stack.harness.call("POST", "/auth/refresh", { body: { refreshToken: stored.refreshToken } });
    expect(refresh.status).toBe(401);
  });

  test("two tabs whose tokens expire together refresh once between them, and the sign-in survives", async ({ signedIn, stack }) => {
    const { page, context } = signedIn;
    const other = await context.newPage();
    await Promise.all([page.goto("/app/deployments"), other.goto("/app/deployments")]);
    const session = () => page.evaluate(() => JSON.parse(localStorage.getItem("cm.session") ?? "null"));
    const before = await session();
    // Both tabs find the access token expired at once: each would spend the same refresh token, which the API takes for theft.
    await page.evaluate(() => {
      const s = JSON.parse(localStorage.getItem("cm.session")!);
      localStorage.setItem("cm.session", JSON.stringify({ ...s, expiresAt: Date.now() - 1_000 }));
    });
    await Promise.all([page.reload(), other.reload()]);
    await expect.poll(async () => (await session())?.refreshToken).not.toBe(before.refreshToken);
    await page.getByRole("heading", { name: "Deployments", exact: true }).waitFor();
    for (const tab of [page, other]) expect(await tab.getByRole("button", { name: "Sign out" }).count()).toBe(1);
    // The pair the tabs share is the live one: the API still honours it.
    const refresh = await stack.harness.call("POST", "/auth/refresh", { body: { refreshToken: (await session()).refreshToken } });
    expect(refresh.status).toBe(200);
  });

  test("shows the wallet's refusal as an error, and nothing is stored", async ({ visit, wallet }) => {
    wallet.refuse = true;
    const { page } = await visit("/sign-in");
    await page.getByRole("button", { name: wallet.name }).click();
    await expect.poll(() => page.getByRole("alert").textContent()).toContain("User rejected the request.");
    expect(await page.evaluate(() => localStorage.getItem("cm.session"))).toBeNull();
  });

  test("a page for signed-in wallets asks a visitor to sign in first, and shows itself once signed in", async ({ visit, wallet }) => {
    const { page } = await visit("/deployments");
    await page.getByRole("heading", { name: "Sign in with a Solana wallet" }).waitFor();
    await page.getByRole("button", { name: wallet.name }).click();
    await page.getByRole("button", { name: "Sign out" }).waitFor();
    await expect.poll(() => page.getByRole("heading", { name: "Sign in with a Solana wallet" }).count()).toBe(0);
  });

  test("lists the seeded nodes by price with GPU and status badges; each filter narrows the list; the state stays live", async ({ visit, stack }) => {
    const h = stack.harness;
    const operator = await h.signIn();
    const seed = async (name: string, o: Parameters<typeof h.onlineNode>[1]) => {
      const node = await h.onlineNode(operator.token, o);
      await h.call("PATCH", `/operator/nodes/${node.id}`, { token: operator.token, body: { name } });
      return node;
    };
    await h.takeAllNodesOffline();
    const big = await seed("h100 box", {
      gpus: [
        { name: "H100", vramMb: 81_920 },
        { name: "H100", vramMb: 81_920 },
      ],
      hourlyRateCents: 200,
      region: "eu-west",
    });
    await seed("cpu box", { hourlyRateCents: 20, region: "us-east", cpuCores: 8, ramMb: 16_000 });
    await seed("4090 box", { gpus: [{ name: "RTX 4090", vramMb: 24_576 }], hourlyRateCents: 80, region: "us-west" });

    const { page } = await visit("/nodes");
    const names = () => page.locator(".node h2").allTextContents();
    await expect.poll(names).toEqual(["cpu box", "4090 box", "h100 box"]);
    const bigCard = page.locator(`[data-node-id="${big.id}"]`);
    expect(await bigCard.getByText("2 × H100 · 80 GB").count()).toBe(1);
    expect(await bigCard.locator(".badge.status-online").textContent()).toBe("online");
    expect(await seriousViolations(page)).toEqual([]);
    await screenshots(page, "catalogue");

    const filters: Array<[string, string, string[]]> = [
      ["Region", "us-west", ["4090 box"]],
      ["GPU", "false", ["cpu box"]],
      ["Min GPU memory (MB)", "40000", ["h100 box"]],
      ["Min CPU cores", "16", ["4090 box", "h100 box"]],
      ["Min RAM (MB)", "100000", ["4090 box", "h100 box"]],
      ["Max price (credits/GPU-hour)", "100", ["cpu box", "4090 box"]],
      ["Status", "offline", []],
    ];
    for (const [label, value, expected] of filters) {
      const field = page.getByLabel(label, { exact: true });
      if ((await field.evaluate((e) => e.tagName)) === "SELECT") await field.selectOption(value);
      else await field.fill(value);
      await expect.poll(names, { message: `${label} ${value}` }).toEqual(expected);
      // The filter is in the address: a link to it shows the same.
      expect(new URL(page.url()).search).toContain(`=${value}`);
      if ((await field.evaluate((e) => e.tagName)) === "SELECT") await field.selectOption("");
      else await field.fill("");
    }
    await page.getByLabel("Sort").selectOption("price-desc");
    await expect.poll(names).toEqual(["h100 box", "4090 box", "cpu box"]);

    // Live: the node goes offline, and the open page says so without a reload.
    await h.deps.repos.nodes.markOffline(big.id);
    h.deps.events.emit("node-changed", big.id);
    await expect.poll(() => bigCard.locator(".badge").first().textContent(), { timeout: 8_000 }).toBe("offline");
  });

  test("shows the API's refusal of a filter with its message and code, and recovers when the filter is mended", async ({ visit }) => {
    const { page } = await visit("/nodes?minCpuCores=-1");
    const alert = page.getByRole("alert");
    await expect.poll(() => alert.textContent()).toContain("VALIDATION_ERROR");
    expect(await alert.textContent()).toMatch(/minCpuCores/);
    await page.getByLabel("Min CPU cores", { exact: true }).fill("1");
    await expect.poll(() => alert.count()).toBe(0);
  });

  test("finds templates by category and by search, on a phone", async ({ visit }) => {
    const { page } = await visit("/templates", { viewport: PHONE });
    const shown = () => page.locator(".template h3").count();
    await expect.poll(shown).toBeGreaterThan(1);
    const all = await shown();
    await page.getByLabel("Category").selectOption("notebook");
    await expect.poll(shown).toBeLessThan(all);
    expect(await page.locator("section h2").allTextContents()).toEqual(["Notebooks"]);
    await page.getByLabel("Category").selectOption("");
    await page.getByLabel("Search").fill("zzzz-no-such-template");
    await page.getByText("No template matches.").waitFor();
    await page.getByLabel("Search").fill("");
    await expect.poll(shown).toBe(all);
    expect(await seriousViolations(page)).toEqual([]);
    await screenshots(page, "templates");
  });

  test("every page in the navigation loads with no serious accessibility violation, signed in", async ({ signedIn }) => {
    const { page } = signedIn;
    const nav = page.getByRole("navigation", { name: "Main" });
    const labels = await nav.getByRole("link").allTextContents();
    expect(labels).toEqual(["Catalogue", "Templates", "Deploy", "Deployments", "Credits", "Operator", "Account"]);
    for (const label of labels) {
      await nav.getByRole("link", { name: label, exact: true }).click();
      await expect.poll(() => page.title()).toContain(label);
      expect(await seriousViolations(page), label).toEqual([]);
    }
  });
});
