import { findReference, validateTransfer } from "@solana/pay";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Connection, Keypair, PublicKey } from "@solana/web3.js";
import BigNumber from "bignumber.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainClient } from "../../src/services/chain/chain-client";
import { findPaymentByReference } from "../../src/services/chain/find-payment";
import { depositTransferRequestUrl, newReference } from "../../src/services/chain/transfer-request";
import type { ExpectedDeposit } from "../../src/services/chain/verify-deposit";
import { createWeb3ChainClient } from "../../src/services/chain/web3-chain-client";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../support/fake-solana-rpc";
import { USDC_DECIMALS, USDC_MINT } from "../support/solana-fixtures";
import { payTransferRequest } from "../support/solana-pay";

// A deposit paid the way a wallet app pays a Solana Pay QR code, by the real
// @solana/pay client, then found by its reference as the control plane will find it.

const START_MS = Date.UTC(2026, 0, 5, 9, 0, 0);
let nowMs = START_MS;
let rpc: FakeSolanaRpc;
let connection: Connection;
let chain: ChainClient;
beforeAll(async () => {
  rpc = await startFakeSolanaRpc({ now: () => nowMs });
  connection = new Connection(rpc.url, "confirmed");
  chain = createWeb3ChainClient({ rpcUrl: rpc.url, commitment: "confirmed", requestTimeoutMs: 2_000 });
});
afterAll(async () => {
  await rpc.close();
});

const treasury = Keypair.generate().publicKey;
let depositNumber = 0;

/** A tenant with 100 USDC, a deposit of `usdc` for them, and its transfer request. */
function newDeposit(usdc = 10n) {
  const payer = Keypair.generate();
  rpc.fundTokenAccount({ owner: payer.publicKey, mint: USDC_MINT, decimals: USDC_DECIMALS, amountBaseUnits: 100_000_000n });
  // The treasury's token account exists, as createTransfer requires of a recipient.
  rpc.fundTokenAccount({ owner: treasury, mint: USDC_MINT, decimals: USDC_DECIMALS, amountBaseUnits: 0n });
  const deposit = {
    id: `dpst_${++depositNumber}`,
    treasuryWallet: treasury.toBase58(),
    stableMint: USDC_MINT.toBase58(),
    amountStableBase: Number(usdc * 1_000_000n),
    stableDecimals: USDC_DECIMALS,
    creditsMicro: Number(usdc) * 100 * 1_000_000,
  };
  const reference = newReference();
  const expected: ExpectedDeposit = {
    treasuryOwner: deposit.treasuryWallet,
    mint: deposit.stableMint,
    amountBaseUnits: BigInt(deposit.amountStableBase),
    payer: payer.publicKey.toBase58(),
    notAfterMs: nowMs + 30 * 60_000,
  };
  return { payer, reference, expected, url: depositTransferRequestUrl(deposit, reference, "Compute marketplace") };
}

describe("a deposit paid with @solana/pay", () => {
  it("lands, is found by findReference and passes validateTransfer; the treasury got the amount", async () => {
    const { payer, reference, url } = newDeposit(10n);
    const treasuryAccount = getAssociatedTokenAddressSync(USDC_MINT, treasury);
    const before = rpc.tokenBalance(treasuryAccount) ?? 0n;
    const signature = await payTransferRequest(connection, url, payer);

    expect(rpc.tokenBalance(treasuryAccount)).toBe(before + 10_000_000n);
    const found = await findReference(connection, new PublicKey(reference), { finality: "confirmed" });
    expect(found.signature).toBe(signature);
    expect(found.blockTime).toBe(Math.floor(nowMs / 1000));
    const validated = await validateTransfer(
      connection,
      signature,
      { recipient: treasury, amount: new BigNumber(10), splToken: USDC_MINT, reference: new PublicKey(reference) },
      { commitment: "confirmed" },
    );
    expect(validated.blockTime).toBe(Math.floor(nowMs / 1000));
    // What createTransfer read on the way: the wallets, the mint and both token accounts.
    const methods = new Set(rpc.calls.map((c) => c.method));
    for (const method of ["getAccountInfo", "getLatestBlockhash", "sendTransaction", "signatureSubscribe", "getSignaturesForAddress", "getTransaction"]) {
      expect(methods).toContain(method);
    }
  });

  it("is found by its reference with the confirm path's checks, and the block time is the payment's", async () => {
    const { payer, reference, url, expected } = newDeposit(10n);
    const signature = await payTransferRequest(connection, url, payer);
    const paidAtMs = nowMs;
    nowMs += 60_000;

    const search = await findPaymentByReference(chain, reference, expected);
    expect(search).toMatchObject({ kind: "paid", signature, receivedBaseUnits: 10_000_000n, tx: { blockTimeMs: Math.floor(paidAtMs / 1000) * 1000 } });
    const parsed = await connection.getParsedTransaction(signature, { maxSupportedTransactionVersion: 0 });
    // The node names the reference as a "signer" of the transfer: the field layout is the multisig one.
    expect(parsed?.transaction.message.instructions.at(-1)).toMatchObject({
      parsed: { type: "transferChecked", info: { multisigAuthority: payer.publicKey.toBase58(), signers: [reference] } },
    });
  });

  it("refuses what the deposit's checks refuse, with their codes: too little, another payer, after expiry", async () => {
    const { payer, reference, url, expected } = newDeposit(10n);
    await payTransferRequest(connection, url, payer);
    expect(await findPaymentByReference(chain, reference, { ...expected, amountBaseUnits: 10_000_001n })).toMatchObject({
      kind: "refused",
      code: "AMOUNT_TOO_LOW",
    });
    expect(await findPaymentByReference(chain, reference, { ...expected, payer: Keypair.generate().publicKey.toBase58() })).toMatchObject({
      kind: "refused",
      code: "PAYER_MISMATCH",
    });
    expect(await findPaymentByReference(chain, reference, { ...expected, notAfterMs: nowMs - 1_000 })).toMatchObject({
      kind: "refused",
      code: "PAYMENT_AFTER_EXPIRY",
    });
  });

  it("finds the payment among other transactions naming its reference: the first that pays counts", async () => {
    const { payer, reference, url, expected } = newDeposit(10n);
    // Someone else pays a little to the same reference first, then the tenant pays, then someone again.
    const stranger = newDeposit(1n);
    const copied = (from: ReturnType<typeof newDeposit>) => from.url.replace(from.reference, reference);
    const strangersFirst = await payTransferRequest(connection, copied(stranger), stranger.payer);
    const signature = await payTransferRequest(connection, url, payer);
    await payTransferRequest(connection, copied(stranger), stranger.payer);

    expect(await findPaymentByReference(chain, reference, expected)).toMatchObject({ kind: "paid", signature });
    // The stranger's own check finds its first payment, to the amount it asked for.
    expect(await findPaymentByReference(chain, reference, stranger.expected)).toMatchObject({ kind: "paid", signature: strangersFirst });
  });

  it("answers not_found for a reference nothing names, and unavailable when the RPC fails", async () => {
    const { reference, expected } = newDeposit();
    expect(await findPaymentByReference(chain, reference, expected)).toEqual({ kind: "not_found" });
    rpc.fail("getSignaturesForAddress", { kind: "error", error: { code: -32005, message: "Node is behind by 42 slots" } }, 1);
    expect(await findPaymentByReference(chain, reference, expected)).toEqual({
      kind: "unavailable",
      reason: expect.stringContaining("Node is behind by 42 slots"),
    });

    const paid = newDeposit();
    await payTransferRequest(connection, paid.url, paid.payer);
    rpc.fail("getTransaction", { kind: "no-answer" }, 1);
    expect(await findPaymentByReference(chain, paid.reference, paid.expected)).toEqual({
      kind: "unavailable",
      reason: "RPC did not answer within 2000 ms",
    });
    expect(await findPaymentByReference(chain, paid.reference, paid.expected)).toMatchObject({ kind: "paid" });
  });
});
