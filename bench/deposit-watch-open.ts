/**
 * Question: what does one idle tick of the deposit watcher cost with N deposits
 * open (CPU of the control plane's process, RPC calls), and is a deposit opened
 * after them and paid by its Solana Pay reference alone credited, and after how
 * many ticks? Issue 36: one account opened 5,000 deposits; the watcher then read
 * all 5,000 every tick and matched payments against the 5,000 oldest only.
 * Baseline, same run: 1 open.
 *
 *   npx tsx bench/deposit-watch-open.ts     (SIZES=1,1000,5000,20000 KINDS=sqlite,postgres)
 *
 * The deposits are written to the database directly (as many accounts' would be:
 * MAX_OPEN_DEPOSITS holds one account to 20), then the watcher ticks by hand, 20
 * times, against the tests' local Solana JSON-RPC node, which runs in this
 * process: the CPU figure includes its side of the calls.
 */

import { rmSync } from "node:fs";
import { createPgDatabase } from "@cm/db/testing";
import { Connection, Keypair } from "@solana/web3.js";
import { testConfig } from "../apps/control-plane/src/config";
import { createDeps } from "../apps/control-plane/src/deps";
import { depositTransferRequestUrl, newReference } from "../apps/control-plane/src/services/chain/transfer-request";
import { DEPOSIT_LABEL } from "../apps/control-plane/src/services/deposit-service";
import { createLogger } from "../apps/control-plane/src/services/logger";
import { startFakeSolanaRpc } from "../apps/control-plane/test/support/fake-solana-rpc";
import { USDC_DECIMALS, USDC_MINT } from "../apps/control-plane/test/support/solana-fixtures";
import { payTransferRequest } from "../apps/control-plane/test/support/solana-pay";

const SIZES = (process.env.SIZES ?? "1,1000,5000,20000").split(",").map(Number);
const KINDS = (process.env.KINDS ?? "sqlite,postgres").split(",");
const TICKS = 20;
const MAX_TICKS_TO_CREDIT = 50;

async function round(dbName: string, url: string, open: number) {
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
      DEPOSIT_WATCH_INTERVAL_MS: 0,
    }),
    { log: createLogger("silent") },
  );
  const { handle } = deps.repos;
  const nowMs = Date.now();
  const deposit = (i: number, userId: string, walletAddress: string, createdAt: number) => ({
    id: `dpst_bench${i}`,
    userId,
    packageId: "pkg_starter",
    walletAddress,
    amountStableBase: 10_000_000,
    stableDecimals: USDC_DECIMALS,
    creditsMicro: 10_000_000_000,
    treasuryWallet: treasury.toBase58(),
    stableMint: USDC_MINT.toBase58(),
    expiresAt: createdAt + 30 * 60_000,
    createdAt,
    reference: newReference(),
    status: "pending" as const,
  });
  const rows = Array.from({ length: open }, (_, i) => deposit(i, `usr_bench${Math.floor(i / 20)}`, Keypair.generate().publicKey.toBase58(), nowMs - 60_000));
  for (let i = 0; i < rows.length; i += 250) await handle.run((db) => db.insert(handle.t.deposits).values(rows.slice(i, i + 250)));

  for (let i = 0; i < 3; i++) await deps.depositWatcher.tick();
  const calls = rpc.calls.length;
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (let i = 0; i < TICKS; i++) await deps.depositWatcher.tick();
  const wallMs = (performance.now() - started) / TICKS;
  const used = process.cpuUsage(cpu);
  const cpuMs = (used.user + used.system) / 1000 / TICKS;
  const callsPerTick = (rpc.calls.length - calls) / TICKS;

  // The newest deposit, paid by its reference alone (a phone wallet that pays and closes).
  const payer = Keypair.generate();
  rpc.fundTokenAccount({ owner: payer.publicKey, mint: USDC_MINT, decimals: USDC_DECIMALS, amountBaseUnits: 1_000_000_000n });
  await deps.repos.auth.upsertUser("usr_bench_payer", payer.publicKey.toBase58(), nowMs);
  const paid = deposit(open, "usr_bench_payer", payer.publicKey.toBase58(), nowMs);
  await handle.run((db) => db.insert(handle.t.deposits).values([paid]));
  await payTransferRequest(connection, depositTransferRequestUrl(paid, paid.reference, DEPOSIT_LABEL), payer);
  const credited = async () => (await deps.repos.deposits.get(paid.id, paid.userId))?.status === "confirmed";
  let ticks = 0;
  while (!(await credited()) && ticks < MAX_TICKS_TO_CREDIT) {
    await deps.depositWatcher.tick();
    ticks++;
  }
  const outcome = (await credited()) ? `credited at tick ${ticks}` : `still pending after ${ticks} ticks`;
  console.log(
    `${dbName.padEnd(8)} ${String(open).padStart(6)} open: idle tick ${cpuMs.toFixed(1)} ms CPU, ${wallMs.toFixed(1)} ms wall, ${callsPerTick.toFixed(1)} RPC calls; the newest, paid by reference: ${outcome}`,
  );
  await deps.close();
  await rpc.close();
}

for (const kind of KINDS)
  for (const open of SIZES) {
    if (kind === "sqlite") {
      const file = `/tmp/cm-bench-deposit-watch-open-${process.pid}-${open}.db`;
      try {
        await round(kind, `file:${file}`, open);
      } finally {
        for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
      }
    } else {
      let db: Awaited<ReturnType<typeof createPgDatabase>>;
      try {
        db = await createPgDatabase();
      } catch (err) {
        console.log(`postgres skipped: ${(err as Error).message}`);
        break;
      }
      try {
        await round(kind, db.url, open);
      } finally {
        await db.drop();
      }
    }
  }
// web3's Connection keeps retrying its WebSocket to the closed RPC node; nothing is left to wait for.
process.exit(0);
