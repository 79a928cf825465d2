import { createTransferCheckedInstruction, createTransferInstruction, getAssociatedTokenAddressSync, TOKEN_PROGRAM_ID } from "@solana/spl-token";
import { Keypair, PublicKey, Transaction, TransactionInstruction, TransactionMessage, VersionedTransaction } from "@solana/web3.js";
import bs58 from "bs58";
import type { FakeCommitment, FakeInnerInstructions, FakeTokenBalance, FakeTxMeta } from "./fake-solana-rpc";

/** Real, signed SPL token payments and the balances a node would record for them. */

export const USDC_MINT = new PublicKey("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v");
export const USDC_DECIMALS = 6;
/** Jupiter v6's program id, used only as an opaque router that transfers by CPI. */
export const ROUTER_PROGRAM_ID = new PublicKey("JUP6LkbZbjS1jKKwapdHNy74zcZ3tLUZoi5QNyVTaV4");
export const DEFAULT_BLOCK_TIME_MS = Date.UTC(2025, 5, 1, 12, 0, 0);
const FEE_LAMPORTS = 5_000;
// Token program error 1 is InsufficientFunds: the usual way a payment fails.
const INSUFFICIENT_FUNDS = { InstructionError: [0, { Custom: 1 }] };

export interface PaymentOptions {
  payer: Keypair;
  treasuryOwner: PublicKey;
  amountBaseUnits: bigint;
  mint?: PublicKey;
  decimals?: number;
  kind?: "transfer" | "transferChecked";
  version?: "legacy" | 0;
  /** "cpi": a router's top-level instruction makes the token transfer as an inner instruction. */
  route?: "direct" | "cpi";
  failed?: boolean;
  /** Whole seconds: the node reports block time in seconds. */
  blockTimeMs?: number;
  slot?: number;
  commitment?: FakeCommitment;
  payerStartBaseUnits?: bigint;
  treasuryStartBaseUnits?: bigint;
  tokenProgramId?: PublicKey;
}

export interface FixturePayment {
  signature: string;
  tx: Transaction | VersionedTransaction;
  meta: FakeTxMeta;
  sourceTokenAccount: PublicKey;
  destinationTokenAccount: PublicKey;
}

export function makeUsdcPayment(options: PaymentOptions): FixturePayment {
  const { payer, treasuryOwner, amountBaseUnits } = options;
  const mint = options.mint ?? USDC_MINT;
  const decimals = options.decimals ?? USDC_DECIMALS;
  const tokenProgramId = options.tokenProgramId ?? TOKEN_PROGRAM_ID;
  const source = getAssociatedTokenAddressSync(mint, payer.publicKey, false, tokenProgramId);
  // The treasury may be a PDA or multisig vault, hence allowOwnerOffCurve.
  const destination = getAssociatedTokenAddressSync(mint, treasuryOwner, true, tokenProgramId);
  const transferIx =
    options.kind === "transferChecked"
      ? createTransferCheckedInstruction(source, mint, destination, payer.publicKey, amountBaseUnits, decimals, [], tokenProgramId)
      : createTransferInstruction(source, destination, payer.publicKey, amountBaseUnits, [], tokenProgramId);
  const cpi = options.route === "cpi";
  const tx = signedTransaction(options.version ?? "legacy", payer, [cpi ? routerInstruction(transferIx) : transferIx]);

  const landed = VersionedTransaction.deserialize(tx.serialize());
  const keys = landed.message.staticAccountKeys.map((k) => k.toBase58());
  const indexOf = (key: PublicKey) => keys.indexOf(key.toBase58());
  const balance = (account: PublicKey, owner: PublicKey, amount: bigint): FakeTokenBalance => ({
    accountIndex: indexOf(account),
    mint: mint.toBase58(),
    owner: owner.toBase58(),
    programId: tokenProgramId.toBase58(),
    amountBaseUnits: amount,
    decimals,
  });
  const payerStart = options.payerStartBaseUnits ?? 1_000n * 10n ** BigInt(decimals);
  const treasuryStart = options.treasuryStartBaseUnits ?? 25n * 10n ** BigInt(decimals);
  // A failed transaction is still recorded, but its token balances do not move.
  const moved = options.failed ? 0n : amountBaseUnits;
  const byIndex = (a: FakeTokenBalance, b: FakeTokenBalance) => a.accountIndex - b.accountIndex;
  const compiledTransfer = {
    programIdIndex: indexOf(transferIx.programId),
    accounts: transferIx.keys.map((k) => indexOf(k.pubkey)),
    data: bs58.encode(transferIx.data),
    stackHeight: 2,
  };
  const innerInstructions: FakeInnerInstructions[] = cpi ? [{ index: 0, instructions: [compiledTransfer] }] : [];

  const meta: FakeTxMeta = {
    err: options.failed ? INSUFFICIENT_FUNDS : null,
    fee: FEE_LAMPORTS,
    slot: options.slot ?? 330_000_123,
    blockTimeSeconds: Math.floor((options.blockTimeMs ?? DEFAULT_BLOCK_TIME_MS) / 1000),
    preTokenBalances: [balance(source, payer.publicKey, payerStart), balance(destination, treasuryOwner, treasuryStart)].sort(byIndex),
    postTokenBalances: [balance(source, payer.publicKey, payerStart - moved), balance(destination, treasuryOwner, treasuryStart + moved)].sort(byIndex),
    innerInstructions,
    ...(options.commitment ? { commitment: options.commitment } : {}),
  };
  const signature = bs58.encode(landed.signatures[0] ?? new Uint8Array(64));
  return { signature, tx, meta, sourceTokenAccount: source, destinationTokenAccount: destination };
}

/** A top-level call to a router that passes the token program and the transfer's accounts along. */
function routerInstruction(inner: TransactionInstruction): TransactionInstruction {
  return new TransactionInstruction({
    programId: ROUTER_PROGRAM_ID,
    keys: [...inner.keys, { pubkey: inner.programId, isSigner: false, isWritable: false }],
    data: Buffer.from([0xe5, 0x17, 0xcb, 0x97]),
  });
}

function signedTransaction(version: "legacy" | 0, payer: Keypair, instructions: TransactionInstruction[]): Transaction | VersionedTransaction {
  // A fresh blockhash per transaction keeps otherwise identical payments distinct.
  const blockhash = Keypair.generate().publicKey.toBase58();
  if (version === "legacy") {
    const tx = new Transaction({ feePayer: payer.publicKey, blockhash, lastValidBlockHeight: 310_000_000 }).add(...instructions);
    tx.sign(payer);
    return tx;
  }
  const message = new TransactionMessage({ payerKey: payer.publicKey, recentBlockhash: blockhash, instructions }).compileToV0Message();
  const tx = new VersionedTransaction(message);
  tx.sign([payer]);
  return tx;
}
