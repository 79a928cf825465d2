/**
 * Questions: how many deposit confirms per second does the control plane verify
 * and credit against a local Solana RPC node, next to the bare RPC lookups it
 * makes (baseline, same run)? And does reading a balance cost more when the user
 * has 100,000 ledger rows than when they have one (baseline, same run)?
 *
 *   npx tsx bench/credits.ts          (CONFIRMS=400 to change)
 */

import { creditsToMicro } from "@cm/db";
import { createPgDatabase } from "@cm/db/testing";
import { Keypair } from "@solana/web3.js";
import nacl from "tweetnacl";
import { testConfig } from "../apps/control-plane/src/config";
import { createDeps } from "../apps/control-plane/src/deps";
import { startServer } from "../apps/control-plane/src/server";
import { createWeb3ChainClient } from "../apps/control-plane/src/services/chain/web3-chain-client";
import { createLogger } from "../apps/control-plane/src/services/logger";
import { startFakeSolanaRpc } from "../apps/control-plane/test/support/fake-solana-rpc";
import { makeUsdcPayment, USDC_MINT } from "../apps/control-plane/test/support/solana-fixtures";

const CONFIRMS = Number(process.env.CONFIRMS ?? 400);
const CONCURRENCY = 8;
const LEDGER_ROWS = 100_000;

async function pool<T>(items: T[], n: number, fn: (t: T) => Promise<void>) {
  let i = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (i < items.length) await fn(items[i++]!);
    }),
  );
}

async function run(dbName: string, url: string) {
  const rpc = await startFakeSolanaRpc();
  const treasury = Keypair.generate().publicKey;
  const deps = await createDeps(
    testConfig({
      DATABASE_URL: url,
      LOG_LEVEL: "silent",
      TREASURY_WALLET: treasury.toBase58(),
      SOLANA_RPC_URL: rpc.url,
      STABLE_MINT: USDC_MINT.toBase58(),
      AUTH_RATE_LIMIT_PER_MIN: 1_000_000,
    }),
    { log: createLogger("silent") },
  );
  const server = await startServer(deps, { port: 0, host: "127.0.0.1" });
  const post = async (path: string, body: unknown, token?: string) => {
    const r = await fetch(server.url + path, {
      method: "POST",
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });
    return { status: r.status, json: (await r.json()) as any };
  };

  // One tenant per confirm, each with a deposit and a landed payment.
  const jobs: Array<{ token: string; depositId: string; sig: string }> = [];
  for (let i = 0; i < CONFIRMS; i++) {
    const kp = Keypair.generate();
    const wallet = kp.publicKey.toBase58();
    const n = await post("/auth/nonce", { walletAddress: wallet });
    const sig64 = Buffer.from(nacl.sign.detached(new TextEncoder().encode(n.json.message), kp.secretKey)).toString("base64");
    const v = await post("/auth/verify", { walletAddress: wallet, message: n.json.message, signature: sig64 });
    const d = await post("/credits/deposit/initiate", { packageId: "pkg_starter", walletAddress: wallet }, v.json.accessToken);
    const p = makeUsdcPayment({ payer: kp, treasuryOwner: treasury, amountBaseUnits: 10_000_000n, blockTimeMs: Math.floor(Date.now() / 1000) * 1000 });
    rpc.addTransaction(p.tx, p.meta);
    jobs.push({ token: v.json.accessToken, depositId: d.json.deposit.depositId, sig: p.signature });
  }

  const chain = createWeb3ChainClient({ rpcUrl: rpc.url, commitment: "confirmed" });
  let t0 = performance.now();
  await pool(jobs, CONCURRENCY, async (j) => void (await chain.getTransfer(j.sig)));
  const rpcPerS = jobs.length / ((performance.now() - t0) / 1000);

  let failures = 0;
  t0 = performance.now();
  await pool(jobs, CONCURRENCY, async (j) => {
    const r = await post("/credits/deposit/confirm", { depositId: j.depositId, txSignature: j.sig }, j.token);
    if (r.status !== 200) failures++;
  });
  const confirmsPerS = jobs.length / ((performance.now() - t0) / 1000);
  console.log(
    `${dbName.padEnd(8)} confirms: ${confirmsPerS.toFixed(0)}/s (${failures} failed); bare RPC lookups: ${rpcPerS.toFixed(0)}/s; ratio ${(confirmsPerS / rpcPerS).toFixed(2)}`,
  );

  // Balance reads: a user with LEDGER_ROWS rows against a user with one.
  const heavy = await deps.repos.auth.upsertUser("usr_heavy", "Heavy11111111111111111111111111111111111111", 0);
  const light = await deps.repos.auth.upsertUser("usr_light", "Light11111111111111111111111111111111111111", 0);
  for (let b = 0; b < LEDGER_ROWS; b += 5_000) {
    await deps.repos.handle.transaction(async (tx) => {
      for (let i = b; i < b + 5_000; i++) {
        await deps.repos.ledger.post(tx, {
          id: `txn_h${i}`,
          userId: heavy.id,
          type: i % 2 ? "usage" : "deposit",
          amountMicro: i % 2 ? -creditsToMicro(1) : creditsToMicro(2),
          description: "bench",
          createdAt: i,
        });
      }
    });
  }
  await deps.repos.handle.transaction((tx) =>
    deps.repos.ledger.post(tx, { id: "txn_l", userId: light.id, type: "deposit", amountMicro: 1, description: "bench", createdAt: 0 }),
  );
  const time = async (fn: () => Promise<unknown>, n = 2000) => {
    for (let i = 0; i < 100; i++) await fn();
    const s = performance.now();
    for (let i = 0; i < n; i++) await fn();
    return ((performance.now() - s) / n) * 1000;
  };
  const heavyUs = await time(() => deps.repos.ledger.balance(heavy.id));
  const lightUs = await time(() => deps.repos.ledger.balance(light.id));
  const sumUs = await time(() => deps.repos.ledger.sumOfRows(heavy.id), 20);
  const check = (await deps.repos.ledger.balance(heavy.id)).balanceMicro === (await deps.repos.ledger.sumOfRows(heavy.id));
  console.log(
    `${dbName.padEnd(8)} balance read: ${heavyUs.toFixed(0)} µs with ${LEDGER_ROWS} rows, ${lightUs.toFixed(0)} µs with 1 row (ratio ${(heavyUs / lightUs).toFixed(2)}); summing the rows instead: ${sumUs.toFixed(0)} µs; running balance = sum: ${check}`,
  );

  await server.close();
  await deps.close();
  await rpc.close();
}

await run("sqlite", `file:/tmp/cm-bench-credits-${process.pid}.db`);
try {
  const pg = await createPgDatabase();
  await run("postgres", pg.url);
  await pg.drop();
} catch (err) {
  console.log(`postgres skipped: ${(err as Error).message}`);
}
