/**
 * Question: with 1,000 open deposits watched, how long from a wallet's payment
 * landing on the RPC node to GET /credits/balance showing it, with no confirm call,
 * and how many RPC calls a second does the deposit watcher make at that load?
 * Baseline, same run: the same with 1 open deposit. Then the 1,000 all of one wallet,
 * which pays them in turn. Issue 27 wants the median under 2 s and the calls bounded
 * (not one per open deposit a second). Each round has a control plane, database and
 * RPC node of its own.
 *
 *   npx tsx bench/deposit-watch.ts     (OPEN=1000 PAYMENTS=30 IDLE_S=20 KINDS=sqlite,postgres)
 *
 * The control plane runs with its real timer (DEPOSIT_WATCH_INTERVAL_MS, 2 s by
 * default) against the local Solana JSON-RPC node from the tests. Each payment is
 * what a wallet app sends for the deposit's transfer request: @solana/pay's
 * createTransfer (a transferChecked naming the reference), signed and sent. A
 * payment waits a random 0-interval before it is sent, so payments land at every
 * phase of the watcher's tick.
 */

import { rmSync } from "node:fs";
import { createPgDatabase } from "@cm/db/testing";
import { createTransfer, parseURL } from "@solana/pay";
import { Connection, Keypair } from "@solana/web3.js";
import nacl from "tweetnacl";
import { testConfig } from "../apps/control-plane/src/config";
import { createDeps } from "../apps/control-plane/src/deps";
import { startServer } from "../apps/control-plane/src/server";
import { createLogger } from "../apps/control-plane/src/services/logger";
import { startFakeSolanaRpc } from "../apps/control-plane/test/support/fake-solana-rpc";
import { USDC_DECIMALS, USDC_MINT } from "../apps/control-plane/test/support/solana-fixtures";
import { median } from "./lib/median";

const OPEN = Number(process.env.OPEN ?? 1000);
const PAYMENTS = Number(process.env.PAYMENTS ?? 30);
const IDLE_S = Number(process.env.IDLE_S ?? 20);
const KINDS = (process.env.KINDS ?? "sqlite,postgres").split(",");
const INTERVAL_MS = 2_000;
/** What the watcher calls; the payer's own calls (account reads, blockhash, send) are not counted. */
const WATCHER_METHODS = new Set(["getSignaturesForAddress", "getTransaction"]);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const p95 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.ceil(xs.length * 0.95) - 1]!;

type Figures = { open: number; medianMs: number; p95Ms: number; paidCallsPerS: number; idleCallsPerS: number };

/**
 * One round on a fresh control plane, database and RPC node: latency over PAYMENTS
 * payments while `others` deposits stay open and watched, each payer's own being the
 * one more. `oneWallet`: one tenant holds them all and pays.
 */
async function measure(dbName: string, url: string, others: number, oneWallet = false): Promise<Figures> {
  const rpc = await startFakeSolanaRpc();
  const connection = new Connection(rpc.url, "confirmed");
  const treasury = Keypair.generate().publicKey;
  rpc.fundTokenAccount({ owner: treasury, mint: USDC_MINT, decimals: USDC_DECIMALS, amountBaseUnits: 0n });
  const deps = await createDeps(
    testConfig({
      DATABASE_URL: url,
      LOG_LEVEL: "silent",
      TREASURY_WALLET: treasury.toBase58(),
      SOLANA_RPC_URL: rpc.url,
      STABLE_MINT: USDC_MINT.toBase58(),
      AUTH_RATE_LIMIT_PER_MIN: 1_000_000,
      DEPOSIT_WATCH_INTERVAL_MS: INTERVAL_MS,
      // The one-wallet round holds OPEN deposits of one account: what the watcher costs past the default cap of 20.
      MAX_OPEN_DEPOSITS: OPEN + PAYMENTS,
    }),
    { log: createLogger("silent") },
  );
  const server = await startServer(deps, { port: 0, host: "127.0.0.1" });
  const api = async (method: string, path: string, token?: string, body?: unknown) => {
    const r = await fetch(server.url + path, {
      method,
      headers: { ...(body ? { "content-type": "application/json" } : {}), ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (r.status !== 200) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
    return (await r.json()) as any;
  };

  async function tenant() {
    const kp = Keypair.generate();
    const wallet = kp.publicKey.toBase58();
    rpc.fundTokenAccount({ owner: kp.publicKey, mint: USDC_MINT, decimals: USDC_DECIMALS, amountBaseUnits: 1_000_000_000n });
    const n = await api("POST", "/auth/nonce", undefined, { walletAddress: wallet });
    const signature = Buffer.from(nacl.sign.detached(new TextEncoder().encode(n.message), kp.secretKey)).toString("base64");
    const v = await api("POST", "/auth/verify", undefined, { walletAddress: wallet, message: n.message, signature });
    return { kp, token: v.accessToken as string };
  }
  type Tenant = Awaited<ReturnType<typeof tenant>>;
  const initiate = async (t: Tenant) =>
    (await api("POST", "/credits/deposit/initiate", t.token, { packageId: "pkg_starter", walletAddress: t.kp.publicKey.toBase58() })).deposit as {
      depositId: string;
      transferRequestUrl: string;
    };
  const available = async (t: Tenant) => (await api("GET", "/credits/balance", t.token)).balance.available as number;
  const watcherCalls = () => rpc.calls.filter((c) => WATCHER_METHODS.has(c.method)).length;

  /** Pays one deposit as a wallet app does; answers ms from the payment landing to the balance showing it. */
  async function payAndWait(t: Tenant, d: { transferRequestUrl: string }) {
    const fields = parseURL(d.transferRequestUrl);
    if (!("recipient" in fields) || !fields.amount) throw new Error("not a transfer request with an amount");
    const tx = await createTransfer(connection, t.kp.publicKey, { ...fields, amount: fields.amount }, { commitment: "confirmed" });
    tx.sign(t.kp);
    const before = await available(t);
    await sleep(Math.random() * INTERVAL_MS);
    // The local node lands a transaction before it answers sendTransaction.
    await connection.sendRawTransaction(tx.serialize());
    const landed = performance.now();
    while ((await available(t)) === before) await sleep(10);
    return performance.now() - landed;
  }

  const only = oneWallet ? await tenant() : undefined;
  // Open deposits watched and never paid, each of its own tenant and wallet (or all of one).
  for (let i = 0; i < others; i++) await initiate(only ?? (await tenant()));
  const payers: Tenant[] = [];
  for (let i = 0; i < PAYMENTS; i++) payers.push(only ?? (await tenant()));
  // Idle first: what watching others + 1 deposits costs with no payment arriving.
  let next = await initiate(payers[0]!);
  await sleep(INTERVAL_MS);
  let calls = watcherCalls();
  let t0 = performance.now();
  await sleep(IDLE_S * 1000);
  const idleCallsPerS = (watcherCalls() - calls) / ((performance.now() - t0) / 1000);

  // Then each payer in turn opens its deposit and pays it, so others + 1 are open at every payment.
  const latencies: number[] = [];
  calls = watcherCalls();
  t0 = performance.now();
  for (let i = 0; i < PAYMENTS; i++) {
    latencies.push(await payAndWait(payers[i]!, next));
    if (i + 1 < PAYMENTS) next = await initiate(payers[i + 1]!);
  }
  const paidCallsPerS = (watcherCalls() - calls) / ((performance.now() - t0) / 1000);
  const f = { open: others + 1, medianMs: median(latencies), p95Ms: p95(latencies), paidCallsPerS, idleCallsPerS };
  console.log(
    `${dbName.padEnd(8)} ${String(f.open).padStart(5)} open${oneWallet ? " (one wallet)" : ""}: landing -> balance median ${f.medianMs.toFixed(0)} ms, p95 ${f.p95Ms.toFixed(0)} ms over ${PAYMENTS} payments; watcher RPC calls ${f.paidCallsPerS.toFixed(2)}/s while paid, ${f.idleCallsPerS.toFixed(2)}/s idle`,
  );
  await server.close();
  await deps.close();
  await rpc.close();
  return f;
}

async function run(dbName: string, newUrl: () => Promise<{ url: string; drop(): Promise<void> }>) {
  const round = async (others: number, oneWallet = false) => {
    const db = await newUrl();
    try {
      return await measure(dbName, db.url, others, oneWallet);
    } finally {
      await db.drop();
    }
  };
  const baseline = await round(0);
  const ratio = (f: Figures, label: string) =>
    console.log(
      `${dbName.padEnd(8)} ratio ${label} / ${baseline.open} open: median ${(f.medianMs / baseline.medianMs).toFixed(2)}x, p95 ${(f.p95Ms / baseline.p95Ms).toFixed(2)}x, calls/s ${(f.paidCallsPerS / baseline.paidCallsPerS).toFixed(2)}x (idle ${(f.idleCallsPerS / baseline.idleCallsPerS).toFixed(2)}x)`,
    );
  const loaded = await round(OPEN - 1);
  ratio(loaded, `${loaded.open} open`);
  // A wallet holding all of them: what a tenant opening deposits by the hundred costs the watcher.
  const crowded = await round(OPEN - 1, true);
  ratio(crowded, `${crowded.open} open of one wallet`);
}

let rounds = 0;
if (KINDS.includes("sqlite"))
  await run("sqlite", async () => {
    const file = `/tmp/cm-bench-deposit-watch-${process.pid}-${rounds++}.db`;
    return {
      url: `file:${file}`,
      drop: async () => {
        for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
      },
    };
  });
if (KINDS.includes("postgres")) {
  try {
    await run("postgres", createPgDatabase);
  } catch (err) {
    console.log(`postgres skipped: ${(err as Error).message}`);
  }
}
