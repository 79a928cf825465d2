import { TOKEN_2022_PROGRAM_ID } from "@solana/spl-token";
import { Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainClient } from "../../src/services/chain/chain-client";
import type { DepositVerdict } from "../../src/services/chain/verify-deposit";
import { verifyDeposit } from "../../src/services/chain/verify-deposit";
import { createWeb3ChainClient } from "../../src/services/chain/web3-chain-client";
import type { FakeSolanaRpc } from "../support/fake-solana-rpc";
import { startFakeSolanaRpc } from "../support/fake-solana-rpc";
import type { PaymentOptions } from "../support/solana-fixtures";
import { DEFAULT_BLOCK_TIME_MS, makeUsdcPayment, USDC_MINT } from "../support/solana-fixtures";

// The whole path the deposit-confirm route takes: a real signed payment, read back
// through the RPC wire format, translated, then judged.

let rpc: FakeSolanaRpc;
let chain: ChainClient;
beforeAll(async () => {
  rpc = await startFakeSolanaRpc();
  chain = createWeb3ChainClient({ rpcUrl: rpc.url, commitment: "confirmed" });
});
afterAll(async () => {
  await rpc.close();
});

const tenant = Keypair.generate();
const treasury = Keypair.generate().publicKey;
const deposit = {
  treasuryOwner: treasury.toBase58(),
  mint: USDC_MINT.toBase58(),
  amountBaseUnits: 50_000_000n,
  payer: tenant.publicKey.toBase58(),
  notAfterMs: DEFAULT_BLOCK_TIME_MS + 15 * 60_000,
};

async function confirm(overrides: Partial<PaymentOptions>): Promise<DepositVerdict> {
  const payment = makeUsdcPayment({ payer: tenant, treasuryOwner: treasury, amountBaseUnits: 50_000_000n, ...overrides });
  rpc.addTransaction(payment.tx, payment.meta);
  const lookup = await chain.getTransfer(payment.signature);
  if (lookup.kind !== "found") throw new Error(`lookup: ${JSON.stringify(lookup)}`);
  return verifyDeposit(lookup.tx, deposit);
}

describe("deposit confirmation on chain", () => {
  it.each([
    { version: "legacy", kind: "transfer", label: "legacy" },
    { version: 0, kind: "transferChecked", label: "v0" },
    { version: 0, kind: "transfer", route: "cpi", label: "v0 via CPI" },
  ] as const)("accepts a good payment ($kind, $label)", async ({ label: _label, ...options }) => {
    expect(await confirm(options)).toEqual({ ok: true, receivedBaseUnits: 50_000_000n });
  });

  it("refuses a payment in another mint", async () => {
    expect(await confirm({ mint: Keypair.generate().publicKey })).toMatchObject({ ok: false, code: "MINT_MISMATCH" });
  });

  it("accepts a transferChecked through the Token-2022 program", async () => {
    expect(await confirm({ tokenProgramId: TOKEN_2022_PROGRAM_ID, kind: "transferChecked" })).toEqual({ ok: true, receivedBaseUnits: 50_000_000n });
  });

  it("refuses a payment to another wallet", async () => {
    expect(await confirm({ treasuryOwner: Keypair.generate().publicKey })).toMatchObject({ ok: false, code: "RECIPIENT_MISMATCH" });
  });

  it("refuses a short payment", async () => {
    expect(await confirm({ amountBaseUnits: 49_999_999n, kind: "transferChecked" })).toMatchObject({ ok: false, code: "AMOUNT_TOO_LOW" });
  });

  it("refuses a failed transaction", async () => {
    expect(await confirm({ failed: true, version: 0 })).toMatchObject({ ok: false, code: "TX_FAILED" });
  });

  it("refuses another wallet's payment", async () => {
    expect(await confirm({ payer: Keypair.generate() })).toMatchObject({ ok: false, code: "PAYER_MISMATCH" });
  });

  it("refuses a payment after the deposit expired", async () => {
    expect(await confirm({ blockTimeMs: deposit.notAfterMs + 1_000 })).toMatchObject({ ok: false, code: "PAYMENT_AFTER_EXPIRY" });
  });
});
