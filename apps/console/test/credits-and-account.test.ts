/**
 * Credits and account pages in a real browser (issue 42): a wallet in the page buys a package
 * (it signs and sends the USDC transfer through the local Solana RPC, the page follows the
 * deposit to credited); a deposit paid out of band by its Solana Pay link is shown credited with
 * no click (the control plane's watcher finds it by reference); an API key is created, shown
 * once, listed and revoked; a registry login is added and removed. axe on both pages, and
 * screenshots at desktop and phone sizes.
 */
import { type CreditPackage, createClient, keypairSigner } from "@cm/sdk";
import { needs } from "@cm/testkit";
import { Connection } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { payTransferRequest } from "../../control-plane/test/support/solana-pay";
import { type ConsolePage, screenshots, seriousViolations, signIn } from "./support/browser";
import { type CreditsStack, openWithPayingWallet, PayingWalletKeys, startCreditsStack } from "./support/credits-stack";

const SEEN = { timeout: 30_000 };

// Skipped with its reason where the machine has no chromium (fails under CI=true), as the other browser tests.
needs("chromium").describe("credits and account pages in a browser", () => {
  let stack: CreditsStack;
  const visits: ConsolePage[] = [];
  beforeAll(async () => {
    stack = await startCreditsStack();
  }, 180_000);
  afterAll(async () => {
    for (const v of visits) await v.context.close();
    await stack?.close();
  });

  async function signedInAt(path: string, wallet: PayingWalletKeys): Promise<ConsolePage> {
    const v = await openWithPayingWallet(stack, wallet, "/");
    visits.push(v);
    await signIn(v.page, wallet);
    await v.page
      .getByRole("navigation", { name: "Main" })
      .getByRole("link", { name: path === "/credits" ? "Credits" : "Account" })
      .click();
    return v;
  }

  /** The packages on offer, as the API answers them to a signed-in script. */
  async function packages(wallet: PayingWalletKeys): Promise<CreditPackage[]> {
    const client = createClient({ baseUrl: stack.url });
    await client.auth.signIn(await keypairSigner(wallet.keypair.secretKey));
    return (await client.credits.packages()).packages;
  }

  const dollars = (credits: number) => `$${(credits / 100).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;

  describe("credits", () => {
    it("buys a package with the wallet: the wallet signs and sends the USDC transfer, the page follows it to credited and shows the new balance", async () => {
      const wallet = new PayingWalletKeys("Pay Wallet");
      wallet.fund(stack, 1_000n);
      const v = await signedInAt("/credits", wallet);
      const { page } = v;
      await page.getByRole("heading", { name: "Credits", level: 1 }).waitFor();
      await expect.poll(() => page.getByTestId("balance-available").textContent(), SEEN).toContain("$0.00");
      const [pkg] = await packages(wallet);

      const card = page.getByRole("listitem").filter({ has: page.getByRole("heading", { name: pkg!.name, exact: true }) });
      await card.getByRole("button", { name: "Buy with Pay Wallet" }).click();
      const purchase = page.getByRole("region", { name: /Buying with Pay Wallet/ });
      await purchase.getByText(`Credited: +${pkg!.creditsToReceive.toLocaleString("en-US")} credits`).waitFor(SEEN);
      await purchase.getByText(`Your balance is now ${dollars(pkg!.creditsToReceive)}`).waitFor(SEEN);
      expect(wallet.sent).toHaveLength(1);
      await expect.poll(() => page.getByTestId("balance-available").textContent(), SEEN).toContain(dollars(pkg!.creditsToReceive));
      // The history shows the deposit with its payment.
      const history = page.getByRole("table");
      await history.getByRole("row").filter({ hasText: "deposit" }).first().waitFor(SEEN);
      expect(await history.textContent()).toContain(`+${dollars(pkg!.creditsToReceive)}`);

      expect(await seriousViolations(page)).toEqual([]);
      await screenshots(page, "credits-bought");
      expect(v.problems).toEqual([]);
    }, 90_000);

    it("buys with a wallet that only signs: the page sends the payment through the RPC the control plane names", async () => {
      const wallet = new PayingWalletKeys("Sign Wallet");
      wallet.signOnly = true;
      wallet.fund(stack, 1_000n);
      const v = await signedInAt("/credits", wallet);
      const { page } = v;
      const [pkg] = await packages(wallet);
      const sentBefore = stack.rpc.sent.length;
      const card = page.getByRole("listitem").filter({ has: page.getByRole("heading", { name: pkg!.name, exact: true }) });
      await card.getByRole("button", { name: "Buy with Sign Wallet" }).click();
      await page.getByText(`Your balance is now ${dollars(pkg!.creditsToReceive)}`).waitFor(SEEN);
      // Sent by the page (the wallet sent nothing itself).
      expect(wallet.sent).toEqual([]);
      expect(stack.rpc.sent.length).toBe(sentBefore + 1);
      expect(v.problems).toEqual([]);
    }, 90_000);

    it("shows a deposit paid out of band by its Solana Pay link as credited, with no click", async () => {
      const wallet = new PayingWalletKeys("Pay Wallet");
      wallet.fund(stack, 1_000n);
      const v = await signedInAt("/credits", wallet);
      const { page } = v;
      const [, pkg] = await packages(wallet);
      const card = page.getByRole("listitem").filter({ has: page.getByRole("heading", { name: pkg!.name, exact: true }) });
      await card.getByRole("button", { name: "Pay by QR code" }).click();

      const purchase = page.getByRole("region", { name: /Pay by scanning/ });
      await purchase.getByRole("img", { name: /Solana Pay QR code/ }).waitFor(SEEN);
      const link = await purchase.getByRole("link", { name: "Open in a wallet app" }).getAttribute("href");
      expect(link).toMatch(/^solana:/);
      expect(await seriousViolations(page)).toEqual([]);
      await screenshots(page, "credits-qr");

      // A phone's wallet app pays the transfer request; the page is not touched again.
      await payTransferRequest(new Connection(stack.rpc.url, "confirmed"), link!, wallet.solana);
      await purchase.getByText(`Credited: +${pkg!.creditsToReceive.toLocaleString("en-US")} credits`).waitFor(SEEN);
      await expect.poll(() => page.getByTestId("balance-available").textContent(), SEEN).toContain(dollars(pkg!.creditsToReceive));
      expect(v.problems).toEqual([]);
    }, 90_000);
  });

  describe("credits' errors", () => {
    it("says what to do when the wallet refuses to pay, and when too many deposits are open", async () => {
      const wallet = new PayingWalletKeys("Pay Wallet");
      wallet.fund(stack, 1_000n);
      const v = await signedInAt("/credits", wallet);
      const { page } = v;
      const [pkg] = await packages(wallet);
      const card = page.getByRole("listitem").filter({ has: page.getByRole("heading", { name: pkg!.name, exact: true }) });

      wallet.refuse = true;
      await card.getByRole("button", { name: "Buy with Pay Wallet" }).click();
      const purchase = page.getByRole("region", { name: /Buying with Pay Wallet/ });
      await purchase.getByRole("alert").getByText("User rejected the request.").waitFor(SEEN);
      await purchase.getByText("Nothing was paid. Try again and approve the payment in Pay Wallet, or pay by QR code.").waitFor();
      expect(wallet.sent).toEqual([]);

      // That deposit stays open until it expires; two more reach this installation's MAX_OPEN_DEPOSITS (3).
      const client = createClient({ baseUrl: stack.url });
      await client.auth.signIn(await keypairSigner(wallet.keypair.secretKey));
      for (let i = 0; i < 2; i++) await client.credits.initiateDeposit(pkg!.id, wallet.address);
      await card.getByRole("button", { name: "Pay by QR code" }).click();
      const refused = page.getByRole("region", { name: /Pay by scanning/ }).getByRole("alert");
      await refused.getByText("TOO_MANY_OPEN_DEPOSITS").waitFor(SEEN);
      await refused.getByText("Pay one of your open deposits, or wait until the oldest expires").waitFor();
      expect(await seriousViolations(page)).toEqual([]);
      await screenshots(page, "credits-refused");
      expect(v.problems).toEqual([]);
    }, 90_000);
  });

  describe("account", () => {
    it("creates an API key shown once, lists it, revokes it; adds a registry login and removes it", async () => {
      const wallet = new PayingWalletKeys("Pay Wallet");
      const v = await signedInAt("/account", wallet);
      const { page, context } = v;
      await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: stack.url });
      await page.getByRole("heading", { name: "Account", level: 1 }).waitFor();

      await page.getByLabel("Key name").fill("ci-deploys");
      await page.getByRole("checkbox", { name: /deploy:/ }).check();
      await page.getByLabel("Expires after").selectOption({ label: "7 days" });
      await page.getByRole("button", { name: "Create key" }).click();
      const shown = page.getByRole("region", { name: /Your new key/ });
      await shown.getByText("This is the only time the key is shown.").waitFor(SEEN);
      const key = (await shown.getByTestId("new-api-key").textContent())!;
      expect(key).toMatch(/^cmk_/);
      await shown.getByRole("button", { name: "Copy key" }).click();
      await shown.getByText("Copied to the clipboard.").waitFor(SEEN);
      expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(key);
      // The key works for a script.
      expect((await fetch(`${stack.url}/credits/balance`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);

      const keys = page.getByRole("list", { name: "API keys" });
      const row = keys.getByRole("listitem", { name: "API key ci-deploys" });
      await row.waitFor(SEEN);
      expect(await row.textContent()).toContain("read, deploy");
      expect(await row.textContent()).not.toContain(key);
      expect(await seriousViolations(page)).toEqual([]);
      await screenshots(page, "account-key-shown");

      await shown.getByRole("button", { name: "I have stored it" }).click();
      await shown.waitFor({ state: "detached" });
      expect(await page.content()).not.toContain(key);

      await row.getByRole("button", { name: "Revoke the key “ci-deploys”" }).click();
      await row.getByText("Scripts using it stop working at once.").waitFor();
      await row.getByRole("button", { name: "Yes, revoke" }).click();
      await row.waitFor({ state: "detached", ...SEEN });
      expect((await fetch(`${stack.url}/credits/balance`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(401);

      await page.getByLabel("Registry", { exact: true }).fill("ghcr.io");
      await page.getByLabel("Username").fill("octo");
      await page.getByLabel("Password or access token").fill("ghp_not-a-real-token");
      await page.getByRole("button", { name: "Add login" }).click();
      const login = page.getByRole("list", { name: "Registry credentials" }).getByRole("listitem", { name: "Registry login octo at ghcr.io" });
      await login.waitFor(SEEN);
      expect(await page.content()).not.toContain("ghp_not-a-real-token");
      expect(await seriousViolations(page)).toEqual([]);
      await screenshots(page, "account");

      await login.getByRole("button", { name: "Remove the login octo at ghcr.io" }).click();
      await login.getByRole("button", { name: "Yes, remove" }).click();
      await login.waitFor({ state: "detached", ...SEEN });
      await page.getByText("No registry logins yet").waitFor(SEEN);
      expect(v.problems).toEqual([]);
    }, 90_000);
  });
});
