import * as splToken from "@solana/spl-token";
import type { ParsedTransactionWithMeta } from "@solana/web3.js";
import { PublicKey } from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import { TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, toTransferFacts } from "../../src/services/chain/to-transfer-facts";

// Shapes as a mainnet node answers getTransaction(jsonParsed, maxSupportedTransactionVersion 0),
// with made-up keys. `fromWire` does what web3.js's response coercion does: strings -> PublicKey.

const USDC = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";
const TOKEN = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA";
const TOKEN_2022 = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb";
const PAYER = "5vG75bmYbUyn4qoRc953JhgWeYfyfH8rnpMBsSBgoYGR";
const TREASURY = "DbCmoMW96nmiCQFhWShCTNk4UC1jQBhqwuTjcQcsSn1E";
const PAYER_ATA = "CEUTxdmZxdKbMSbeVku3CNjUFtYiDyPN5apYwFffWurG";
const TREASURY_ATA = "7ZizzBuhrKhAiH65DPp7dQ6WMhE1pk2qJQoWQE7AmQg1";
const MULTISIG = "3iDCDAJGkoirrYbcZRqB2NaegB2TvkYz1m5pZkEXBakT";
const SIGNATURE = "5RVxDZWQkthLDLZih9F6iNSc1k12E8cE92jicXuWQci1DzfzQE3KTDmQ8Dx1qyZqirtNTN4Ske3giNdyLWLstuHf";

const COMPUTE_BUDGET = "ComputeBudget111111111111111111111111111111";
const ROUTER = "JUP6LkbZbjS1jKKwapdHNy74zcZ3tLUZoi5QNyVTaV4";

const key = (pubkey: string, signer = false, writable = false) => ({ pubkey, signer, writable, source: "transaction" });
const KEYS = [key(PAYER, true, true), key(PAYER_ATA, false, true), key(TREASURY_ATA, false, true), key(COMPUTE_BUDGET), key(USDC), key(TOKEN)];
// uiAmount is the node's display float; only `amount` is ever read.
const amount = (base: string) => ({ amount: base, decimals: 6, uiAmount: Number(base) / 1e6, uiAmountString: String(Number(base) / 1e6) });
const balance = (accountIndex: number, owner: string, base: string) => ({
  accountIndex,
  mint: USDC,
  owner,
  programId: TOKEN,
  uiTokenAmount: amount(base),
});
const computeBudget = { accounts: [], data: "3DdGGhkhJbjm", programId: COMPUTE_BUDGET, stackHeight: null };
const transferChecked = (programId = TOKEN, signer: Record<string, unknown> = { authority: PAYER }) => ({
  parsed: {
    info: { destination: TREASURY_ATA, mint: USDC, source: PAYER_ATA, tokenAmount: amount("25000000"), ...signer },
    type: "transferChecked",
  },
  program: "spl-token",
  programId,
  stackHeight: null,
});

interface WireOverrides {
  instructions?: unknown[];
  meta?: Record<string, unknown> | null;
  blockTime?: number | null;
}

function wireTx(overrides: WireOverrides = {}) {
  const meta =
    overrides.meta === null
      ? null
      : {
          computeUnitsConsumed: 6_348,
          err: null,
          fee: 105_000,
          innerInstructions: [],
          logMessages: [],
          preBalances: [1e9, 2039280, 2039280, 1, 521498880, 934087680],
          postBalances: [999895000, 2039280, 2039280, 1, 521498880, 934087680],
          preTokenBalances: [balance(1, PAYER, "80000000"), balance(2, TREASURY, "1000000")],
          postTokenBalances: [balance(1, PAYER, "55000000"), balance(2, TREASURY, "26000000")],
          rewards: [],
          status: { Ok: null },
          ...overrides.meta,
        };
  const message = {
    accountKeys: KEYS,
    addressTableLookups: [],
    instructions: overrides.instructions ?? [computeBudget, transferChecked()],
    recentBlockhash: "FeZ12ysAUjFTspWXu5hBEEUjaNHhQh9jbdeqKiW17Amz",
  };
  const blockTime = overrides.blockTime === undefined ? 1_750_000_000 : overrides.blockTime;
  return { blockTime, meta, slot: 345_678_901, transaction: { message, signatures: [SIGNATURE] }, version: 0 };
}

// `any` here stands in for web3's untyped coercion of the same JSON.
function fromWire(wire: ReturnType<typeof wireTx>): ParsedTransactionWithMeta {
  const toKey = (address: string) => new PublicKey(address);
  const instruction = (ix: any) => ({ ...ix, programId: toKey(ix.programId), ...(ix.accounts ? { accounts: ix.accounts.map(toKey) } : {}) });
  const meta = wire.meta as any;
  const message = wire.transaction.message;
  return {
    ...wire,
    meta: meta && {
      ...meta,
      innerInstructions: meta.innerInstructions.map((inner: any) => ({ ...inner, instructions: inner.instructions.map(instruction) })),
    },
    transaction: {
      ...wire.transaction,
      message: {
        ...message,
        accountKeys: message.accountKeys.map((k) => ({ ...k, pubkey: toKey(k.pubkey) })),
        instructions: message.instructions.map(instruction),
      },
    },
  } as ParsedTransactionWithMeta;
}

const expectedTransfer = {
  mint: USDC,
  source: PAYER_ATA,
  destination: TREASURY_ATA,
  destinationOwner: TREASURY,
  authority: PAYER,
  amountBaseUnits: 25_000_000n,
  decimals: 6,
};

describe("toTransferFacts", () => {
  it("knows the token programs by the same addresses as @solana/spl-token", () => {
    expect(TOKEN_PROGRAM_ID).toBe(splToken.TOKEN_PROGRAM_ID.toBase58());
    expect(TOKEN_2022_PROGRAM_ID).toBe(splToken.TOKEN_2022_PROGRAM_ID.toBase58());
  });

  it("reads a wallet's transferChecked, skipping compute budget instructions", () => {
    const facts = toTransferFacts(fromWire(wireTx()));
    expect(facts).toEqual({
      signature: SIGNATURE,
      slot: 345_678_901,
      blockTimeMs: 1_750_000_000_000,
      failed: false,
      transfers: [expectedTransfer],
      tokenBalanceDeltas: [
        { account: PAYER_ATA, accountIndex: 1, owner: PAYER, mint: USDC, deltaBaseUnits: -25_000_000n, decimals: 6 },
        { account: TREASURY_ATA, accountIndex: 2, owner: TREASURY, mint: USDC, deltaBaseUnits: 25_000_000n, decimals: 6 },
      ],
      accountKeys: [PAYER, PAYER_ATA, TREASURY_ATA, COMPUTE_BUDGET, USDC, TOKEN],
    });
  });

  it("takes a plain transfer's mint and destination owner from the token balances", () => {
    const info = { amount: "25000000", authority: PAYER, destination: TREASURY_ATA, source: PAYER_ATA };
    const transfer = { parsed: { info, type: "transfer" }, program: "spl-token", programId: TOKEN, stackHeight: null };
    expect(toTransferFacts(fromWire(wireTx({ instructions: [transfer] }))).transfers).toEqual([expectedTransfer]);
  });

  it("reads a transfer made by CPI from the inner instructions", () => {
    const router = { accounts: [PAYER, PAYER_ATA, TREASURY_ATA, USDC, TOKEN], data: "2Tq7yXbRZj8", programId: ROUTER, stackHeight: null };
    const inner = { ...transferChecked(), stackHeight: 2 };
    const parsed = { info: { account: TREASURY_ATA }, type: "initializeImmutableOwner" };
    const unrelated = { parsed, program: "spl-token", programId: TOKEN, stackHeight: 2 };
    const wire = wireTx({ instructions: [computeBudget, router], meta: { innerInstructions: [{ index: 1, instructions: [unrelated, inner] }] } });
    expect(toTransferFacts(fromWire(wire)).transfers).toEqual([expectedTransfer]);
  });

  it("reads Token-2022 and multisig-signed transfers", () => {
    const multisig = transferChecked(TOKEN_2022, { multisigAuthority: MULTISIG, signers: [PAYER] });
    const facts = toTransferFacts(fromWire(wireTx({ instructions: [multisig] })));
    expect(facts.transfers).toEqual([{ ...expectedTransfer, authority: MULTISIG }]);
  });

  it("ignores look-alike instructions from other programs", () => {
    const impostor = { ...transferChecked(), programId: ROUTER };
    expect(toTransferFacts(fromWire(wireTx({ instructions: [impostor] }))).transfers).toEqual([]);
  });

  it("counts a token account created in the transaction from zero", () => {
    const wire = wireTx({ meta: { preTokenBalances: [balance(1, PAYER, "80000000")] } });
    const treasuryDelta = toTransferFacts(fromWire(wire)).tokenBalanceDeltas.find((d) => d.owner === TREASURY);
    expect(treasuryDelta?.deltaBaseUnits).toBe(26_000_000n);
  });

  it("marks a failed transaction and one without meta as failed", () => {
    const err = { InstructionError: [1, { Custom: 1 }] };
    const failed = wireTx({ meta: { err, status: { Err: err } } });
    expect(toTransferFacts(fromWire(failed)).failed).toBe(true);
    expect(toTransferFacts(fromWire(wireTx({ meta: null }))).failed).toBe(true);
  });

  it("keeps a missing block time as null", () => {
    expect(toTransferFacts(fromWire(wireTx({ blockTime: null }))).blockTimeMs).toBeNull();
  });

  it("drops amounts that are not exact integer strings", () => {
    const weird = transferChecked();
    (weird.parsed.info.tokenAmount as { amount: string }).amount = "2.5e7";
    expect(toTransferFacts(fromWire(wireTx({ instructions: [weird] }))).transfers).toEqual([]);
  });
});
