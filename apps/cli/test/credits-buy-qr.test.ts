import { spawn } from "node:child_process";
import { sqliteDatabase } from "@cm/testkit";
import { parseURL } from "@solana/pay";
import { Connection, Keypair } from "@solana/web3.js";
import qrcode from "qrcode-generator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../../control-plane/test/support/fake-solana-rpc";
import { type Harness, startHarness } from "../../control-plane/test/support/harness";
import { USDC_DECIMALS, USDC_MINT } from "../../control-plane/test/support/solana-fixtures";
import { payTransferRequest } from "../../control-plane/test/support/solana-pay";
import { ENTRY, ROOT, TSX, terminal } from "./support/cli";

// `cm credits buy --qr`: the real cm prints a Solana Pay link and its QR code and waits;
// a separate wallet (the real @solana/pay client) pays the link, the control plane's
// watcher finds the payment by its reference, and cm ends with the balance.

let h: Harness;
let rpc: FakeSolanaRpc;
let connection: Connection;
let t: ReturnType<typeof terminal>;
let payer: Keypair;
let packageCredits: number;
let packageId: string;
const treasury = Keypair.generate().publicKey;
/** How far the chain's clock runs ahead of the control plane's: a payment can land after expiresAt before the control plane gets there. */
let chainAheadMs = 0;
beforeAll(async () => {
  // The chain's clock is the control plane's, so block times fall inside the deposit's life.
  rpc = await startFakeSolanaRpc({ now: () => h.clock.now() + chainAheadMs });
  connection = new Connection(rpc.url, "confirmed");
  h = await startHarness(sqliteDatabase, { config: { TREASURY_WALLET: treasury.toBase58(), SOLANA_RPC_URL: rpc.url, STABLE_MINT: USDC_MINT.toBase58() } });
  // A wallet app's createTransfer requires the treasury's token account to exist.
  rpc.fundTokenAccount({ owner: treasury, mint: USDC_MINT, decimals: USDC_DECIMALS, amountBaseUnits: 0n });
  // No RPC in cm's environment: --qr needs none.
  t = terminal({ CM_API_URL: h.url });
  payer = Keypair.fromSecretKey(t.keypair().secretKey);
  rpc.fundTokenAccount({ owner: payer.publicKey, mint: USDC_MINT, decimals: USDC_DECIMALS, amountBaseUnits: 1_000_000_000n });
  expect((await t.cm(["login"])).code).toBe(0);
  const pkg = JSON.parse((await t.cm(["credits", "packages", "--json"])).stdout).packages[0];
  packageId = pkg.id;
  packageCredits = pkg.creditsToReceive;
});
afterAll(async () => {
  t?.close();
  await h?.close();
  await rpc?.close();
});

/** The real cm with its output read as it comes, for a command that waits on something the test does. */
function running(args: string[]) {
  const child = spawn(TSX, [ENTRY, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: t.home, XDG_CONFIG_HOME: `${t.home}/.config`, NO_COLOR: "1", CM_API_URL: h.url },
  });
  let stdout = "";
  let stderr = "";
  const waiters: Array<() => void> = [];
  const wake = () => {
    for (const w of waiters.splice(0)) w();
  };
  child.stdout.on("data", (b: Buffer) => {
    stdout += b.toString();
    wake();
  });
  child.stderr.on("data", (b: Buffer) => {
    stderr += b.toString();
    wake();
  });
  let closed = false;
  const exited = new Promise<number | null>((done) =>
    child.on("close", (code) => {
      closed = true;
      wake();
      done(code);
    }),
  );
  return {
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    /** Resolves once stderr has a line matching `pattern` (cm prints the link, then the QR code and what it waits for). */
    async until(pattern: RegExp) {
      while (!pattern.test(stderr)) {
        if (closed) throw new Error(`cm exited ${child.exitCode}: ${stderr}`);
        await new Promise<void>((w) => waiters.push(w));
      }
    },
    exited,
    kill: () => child.kill(),
  };
}

describe("cm credits buy --qr", () => {
  it("prints a transfer request a wallet pays; the watcher credits it and cm ends with the balance", async () => {
    const cm = running(["credits", "buy", packageId, "--qr"]);
    try {
      await cm.until(/^Waiting for the payment/m);
      const url = cm.stdout.trim();
      expect(url).toMatch(/^solana:/);
      expect(url.split("\n")).toHaveLength(1);
      const fields = parseURL(url);
      expect(fields).toMatchObject({ recipient: treasury, splToken: USDC_MINT });
      // A QR block on stderr: square rows of half blocks, a quiet zone around it.
      const rows = cm.stderr.split("\n").filter((l) => /^[█▀▄ ]+$/.test(l));
      expect(rows.length).toBeGreaterThan(15);
      expect(new Set(rows.map((r) => [...r].length)).size).toBe(1);
      expect(rows[0]).toMatch(/^█+$/);
      // Read back module by module, it is the QR code of the link (light modules drawn, dark ones blank).
      const code = qrcode(0, "L");
      code.addData(url, "Byte");
      code.make();
      const size = code.getModuleCount();
      const upper = (c: string) => c === "█" || c === "▀";
      const lower = (c: string) => c === "█" || c === "▄";
      for (let row = 0; row < size; row++)
        for (let col = 0; col < size; col++) {
          const cell = [...rows[(row + 4) >> 1]!][col + 4]!;
          expect((row + 4) % 2 === 0 ? upper(cell) : lower(cell), `module ${row},${col}`).toBe(!code.isDark(row, col));
        }

      const signature = await payTransferRequest(connection, url, payer);
      await h.deps.depositWatcher.tick();
      expect(await cm.exited).toBe(0);
      expect(cm.stderr).toContain(`+${packageCredits} credits (${signature}).`);
      expect(cm.stdout).toMatch(new RegExp(`\\navailable: +${packageCredits} credits\\n`));
      const history = JSON.parse((await t.cm(["credits", "history", "--json"])).stdout);
      expect(history.transactions[0]).toMatchObject({ type: "deposit", amount: packageCredits, txSignature: signature });
    } finally {
      cm.kill();
    }
  });

  it("--json: the deposit as one line, then the credited deposit and the balance as another", async () => {
    const cm = running(["credits", "buy", packageId, "--qr", "--json"]);
    try {
      await cm.until(/^Waiting for the payment/m);
      const initiated = JSON.parse(cm.stdout);
      expect(initiated).toMatchObject({ depositId: expect.stringMatching(/^dpst_/), creditsToReceive: packageCredits });
      const signature = await payTransferRequest(connection, initiated.transferRequestUrl, payer);
      await h.deps.depositWatcher.tick();
      expect(await cm.exited).toBe(0);
      const lines = cm.stdout.trimEnd().split("\n");
      expect(lines).toHaveLength(2);
      expect(JSON.parse(lines[1]!)).toMatchObject({
        deposit: { depositId: initiated.depositId, status: "confirmed", txSignature: signature },
        balance: { available: packageCredits * 2 },
      });
    } finally {
      cm.kill();
    }
  });

  it("a deposit that expires unpaid ends cm with exit 1 and DEPOSIT_EXPIRED", async () => {
    const cm = running(["credits", "buy", packageId, "--qr"]);
    try {
      await cm.until(/^Waiting for the payment/m);
      const expiresAt = /until (\S+)\)/.exec(cm.stderr)![1]!;
      h.clock.advance(Date.parse(expiresAt) - h.clock.now() + 1);
      expect(await cm.exited).toBe(1);
      expect(cm.stderr).toMatch(/\nerror DEPOSIT_EXPIRED: deposit dpst_\S+ expired at /);
      expect(JSON.parse((await t.cm(["credits", "--json"])).stdout).balance.available).toBe(packageCredits * 2);
    } finally {
      cm.kill();
    }
  });

  it("an expired deposit whose payment was refused ends cm naming the refusal", async () => {
    const cm = running(["credits", "buy", packageId, "--qr"]);
    try {
      await cm.until(/^Waiting for the payment/m);
      const expiresAt = /until (\S+)\)/.exec(cm.stderr)![1]!;
      // The payment lands a minute after expiresAt; the watcher sees it (within the grace) and refuses it.
      chainAheadMs = Date.parse(expiresAt) - h.clock.now() + 60_000;
      const signature = await payTransferRequest(connection, cm.stdout.trim(), payer).finally(() => {
        chainAheadMs = 0;
      });
      await h.deps.depositWatcher.tick();
      h.clock.advance(Date.parse(expiresAt) - h.clock.now() + 1);
      expect(await cm.exited).toBe(1);
      expect(cm.stderr).toContain(`a payment (sig ${signature}) was refused: PAYMENT_AFTER_EXPIRY`);
      expect(cm.stderr).toMatch(/\nerror DEPOSIT_EXPIRED: deposit dpst_\S+ expired at /);
      expect(JSON.parse((await t.cm(["credits", "--json"])).stdout).balance.available).toBe(packageCredits * 2);
    } finally {
      cm.kill();
    }
  });

  it("needs no RPC, but the keypair path still does", async () => {
    const r = await t.cm(["credits", "buy", packageId]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error: credits buy pays through a Solana RPC: pass --rpc URL or set SOLANA_RPC_URL, or --qr to pay from a wallet app/);
  });
});
