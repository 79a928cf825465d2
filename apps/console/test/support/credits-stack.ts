/**
 * The credits test's stack: browser.ts's (a control plane serving the built console, Debian's
 * chromium) with the local Solana RPC the control plane's credits tests use (fake-solana-rpc:
 * it verifies, executes and lands transactions, and holds USDC balances), the deposit watcher
 * running on its own timer, and a paying wallet (paying-wallet.ts) in the page that signs with a
 * real ed25519 key and sends through that RPC.
 *
 * The page reaches the RPC from its own origin, as a console reaches a public RPC: real RPCs
 * answer CORS, the fake does not, so a small proxy on port 0 in front of it adds the headers.
 * The control plane is given the proxy's URL, so it reads the chain where the page sent to.
 */
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { sqliteDatabase } from "@cm/testkit";
import { Connection, Keypair, type PublicKey, VersionedTransaction } from "@solana/web3.js";
import bs58 from "bs58";
import { chromium, type Page } from "playwright-core";
import { ensureConsoleBuilt } from "../../../../scripts/console-build";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../../../control-plane/test/support/fake-solana-rpc";
import { startHarness, TestClock } from "../../../control-plane/test/support/harness";
import { USDC_DECIMALS, USDC_MINT } from "../../../control-plane/test/support/solana-fixtures";
import { CHROMIUM, type ConsolePage, type ConsoleStack, DESKTOP, TestWalletKeys, walletScript } from "./browser";

export interface CreditsStack extends ConsoleStack {
  rpc: FakeSolanaRpc;
  /** The RPC as the page and the control plane reach it (the CORS proxy). */
  rpcUrl: string;
  treasury: PublicKey;
}

export async function startCreditsStack(): Promise<CreditsStack> {
  await ensureConsoleBuilt();
  const clock = new TestClock(Date.now());
  const rpc = await startFakeSolanaRpc({ now: () => clock.now() });
  const proxy = await corsProxy(rpc.url);
  const treasury = Keypair.generate().publicKey;
  const harness = await startHarness(sqliteDatabase, {
    overrides: { clock },
    config: {
      TREASURY_WALLET: treasury.toBase58(),
      SOLANA_RPC_URL: proxy.url,
      STABLE_MINT: USDC_MINT.toBase58(),
      // The watcher on its own timer, as in production: a deposit paid elsewhere is found with no call from anyone.
      DEPOSIT_WATCH_INTERVAL_MS: 500,
      // Few, so that the test reaches the limit in a few calls.
      MAX_OPEN_DEPOSITS: 3,
    },
  });
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, chromiumSandbox: process.getuid?.() !== 0 });
  return {
    harness,
    url: harness.url,
    browser,
    rpc,
    rpcUrl: proxy.url,
    treasury,
    close: async () => {
      await browser.close();
      await harness.close();
      await new Promise((done) => proxy.server.close(done));
      await rpc.close();
    },
  };
}

/** Forwards each request to `target` and answers it with CORS headers, preflights included. */
async function corsProxy(target: string): Promise<{ url: string; server: Server }> {
  const to = new URL(target);
  const cors = {
    "access-control-allow-origin": "*",
    "access-control-allow-methods": "POST, OPTIONS",
    "access-control-allow-headers": "content-type, solana-client",
  };
  const server = createServer((req, res) => {
    if (req.method === "OPTIONS") return void res.writeHead(204, cors).end();
    const forward = httpRequest(
      { host: to.hostname, port: to.port, path: req.url, method: req.method, headers: { ...req.headers, host: to.host } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, { ...answer.headers, ...cors });
        answer.pipe(res);
      },
    );
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/** A payer's keys: the test wallet's, and the USDC it holds on the local RPC. */
export class PayingWalletKeys extends TestWalletKeys {
  /** Offer solana:signTransaction only (the page sends the payment) rather than signAndSendTransaction. */
  signOnly = false;
  readonly solana = Keypair.fromSecretKey(this.keypair.secretKey);
  /** Transactions the wallet signed and sent, as signatures. */
  readonly sent: string[] = [];

  fund(stack: CreditsStack, usdc: bigint) {
    stack.rpc.fundTokenAccount({
      owner: this.solana.publicKey,
      mint: USDC_MINT,
      decimals: USDC_DECIMALS,
      amountBaseUnits: usdc * 10n ** BigInt(USDC_DECIMALS),
    });
  }

  async signAndSend(stack: CreditsStack, bytes: number[]): Promise<number[]> {
    if (this.refuse) throw new Error("User rejected the request.");
    const tx = VersionedTransaction.deserialize(Uint8Array.from(bytes));
    tx.sign([this.solana]);
    const signature = await new Connection(stack.rpc.url, "confirmed").sendRawTransaction(tx.serialize());
    this.sent.push(signature);
    return Array.from(bs58.decode(signature));
  }

  signTransaction(bytes: number[]): number[] {
    if (this.refuse) throw new Error("User rejected the request.");
    const tx = VersionedTransaction.deserialize(Uint8Array.from(bytes));
    tx.sign([this.solana]);
    return Array.from(tx.serialize());
  }
}

/** openConsole's visitor (browser.ts), with the paying wallet registered in the page instead of the sign-in-only one. */
export async function openWithPayingWallet(stack: CreditsStack, wallet: PayingWalletKeys, consolePath = "/"): Promise<ConsolePage> {
  const context = await stack.browser.newContext({ viewport: DESKTOP, baseURL: stack.url });
  await context.exposeFunction("cmPayWalletSign", (message: number[]) => wallet.sign(message));
  await context.exposeFunction("cmPayWalletSignAndSend", (tx: number[]) => wallet.signAndSend(stack, tx));
  await context.exposeFunction("cmPayWalletSignTransaction", (tx: number[]) => wallet.signTransaction(tx));
  const identity = { name: wallet.name, address: wallet.address, publicKey: Array.from(wallet.keypair.publicKey), signOnly: wallet.signOnly };
  await context.addInitScript({ content: `window.cmPayWallet = ${JSON.stringify(identity)};\n${await walletScript("paying-wallet.ts")}` });
  const page: Page = await context.newPage();
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`uncaught: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error" && !/Failed to load resource: the server responded with a status of 4\d\d/.test(m.text())) problems.push(m.text());
  });
  await page.goto(`/app${consolePath}`);
  return { page, context, problems };
}
