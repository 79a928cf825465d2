import {
  ASSOCIATED_TOKEN_PROGRAM_ID,
  decodeTransferCheckedInstruction,
  decodeTransferInstruction,
  getAssociatedTokenAddressSync,
  TOKEN_2022_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
} from "@solana/spl-token";
import type { PublicKey, TransactionError, VersionedTransaction } from "@solana/web3.js";
import { ComputeBudgetProgram, TransactionInstruction } from "@solana/web3.js";
import type { FakeTokenBalance } from "./fake-rpc-wire-format";

/**
 * The token side of the fake chain: mints, token accounts and what the SPL Token and
 * Associated Token Account programs do to them, checked in the order the programs
 * check (so a bad payment fails with the error a real node reports). Lamports are
 * not kept: every fee payer counts as funded.
 */

export interface TokenAccountState {
  mint: string;
  owner: string;
  programId: string;
  amountBaseUnits: bigint;
}

/** What executing a transaction did: the error, the logs, and the token balances around it. */
export interface Execution {
  err: TransactionError | null;
  /** Index of the failing instruction and the node's words for its error, when err is an InstructionError. */
  failure?: { index: number; message: string };
  logs: string[];
  preTokenBalances: FakeTokenBalance[];
  postTokenBalances: FakeTokenBalance[];
  /** Applies the changes (a failed transaction has none). */
  commit(): void;
}

/** A program the fake does not execute: the test needs more of the fake, not a chain error. */
export class UnsupportedByFake extends Error {}

type ProgramError = string | { Custom: number };
export const MEMO_PROGRAMS = new Set(["MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr", "Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo"]);
const TOKEN_PROGRAMS = new Set([TOKEN_PROGRAM_ID.toBase58(), TOKEN_2022_PROGRAM_ID.toBase58()]);
// The programs' own error numbers (spl-token's TokenError, the system program's SystemError).
const INSUFFICIENT_FUNDS = { Custom: 1 };
const MINT_MISMATCH = { Custom: 3 };
const OWNER_MISMATCH = { Custom: 4 };
const MINT_DECIMALS_MISMATCH = { Custom: 18 };
const ACCOUNT_ALREADY_IN_USE = { Custom: 0 };
/** The node's Display of an InstructionError's inner error. */
const ERROR_WORDS: Record<string, string> = {
  InvalidAccountData: "invalid account data for instruction",
  InvalidInstructionData: "invalid instruction data",
  InvalidSeeds: "Provided seeds do not result in a valid address",
  IllegalOwner: "Provided owner is not allowed",
  IncorrectProgramId: "incorrect program id for instruction",
  MissingRequiredSignature: "missing required signature for instruction",
  NotEnoughAccountKeys: "insufficient account keys for instruction",
};
const inWords = (e: ProgramError) => (typeof e === "string" ? (ERROR_WORDS[e] ?? e) : `custom program error: 0x${e.Custom.toString(16)}`);

export class FakeTokenLedger {
  private readonly accounts = new Map<string, TokenAccountState>();
  private readonly mints = new Map<string, { decimals: number; programId: string }>();

  /** Gives `owner` an associated token account of `mint` holding `amountBaseUnits` more (the mint is created with `decimals` on first use). */
  fund(o: { owner: PublicKey; mint: PublicKey; decimals: number; amountBaseUnits: bigint; programId?: PublicKey }): PublicKey {
    const programId = o.programId ?? TOKEN_PROGRAM_ID;
    const mint = this.mints.get(o.mint.toBase58());
    if (mint && mint.decimals !== o.decimals) throw new Error(`mint ${o.mint.toBase58()} has ${mint.decimals} decimals, not ${o.decimals}`);
    this.mints.set(o.mint.toBase58(), { decimals: o.decimals, programId: programId.toBase58() });
    const address = getAssociatedTokenAddressSync(o.mint, o.owner, true, programId);
    const account = this.accounts.get(address.toBase58()) ?? {
      mint: o.mint.toBase58(),
      owner: o.owner.toBase58(),
      programId: programId.toBase58(),
      amountBaseUnits: 0n,
    };
    this.accounts.set(address.toBase58(), { ...account, amountBaseUnits: account.amountBaseUnits + o.amountBaseUnits });
    return address;
  }

  account(address: string): (TokenAccountState & { decimals: number }) | undefined {
    const account = this.accounts.get(address);
    return account && { ...account, decimals: this.decimalsOf(account.mint) };
  }

  /** A mint's decimals, token program and supply (what its accounts hold); undefined for a mint never funded. */
  mint(address: string): { decimals: number; programId: string; supplyBaseUnits: bigint } | undefined {
    const mint = this.mints.get(address);
    if (!mint) return undefined;
    let supplyBaseUnits = 0n;
    for (const account of this.accounts.values()) if (account.mint === address) supplyBaseUnits += account.amountBaseUnits;
    return { ...mint, supplyBaseUnits };
  }

  /** Whether `wallet` owns any token account. */
  ownsAccounts(wallet: string): boolean {
    for (const account of this.accounts.values()) if (account.owner === wallet) return true;
    return false;
  }

  /** Runs the transaction's instructions in order on a copy; nothing changes until commit(), and only if all succeeded. */
  execute(tx: VersionedTransaction): Execution {
    const message = tx.message;
    const keys = message.staticAccountKeys;
    const working = new Map([...this.accounts].map(([k, v]) => [k, { ...v }]));
    const logs: string[] = [];
    let failed: { index: number; error: ProgramError } | undefined;
    for (const [index, compiled] of message.compiledInstructions.entries()) {
      const ix = new TransactionInstruction({
        programId: keys[compiled.programIdIndex]!,
        keys: compiled.accountKeyIndexes.map((i) => ({ pubkey: keys[i]!, isSigner: message.isAccountSigner(i), isWritable: message.isAccountWritable(i) })),
        data: Buffer.from(compiled.data),
      });
      const program = ix.programId.toBase58();
      logs.push(`Program ${program} invoke [1]`);
      const error = this.run(ix, working, logs);
      if (error) {
        logs.push(`Program ${program} failed: ${inWords(error)}`);
        failed = { index, error };
        break;
      }
      logs.push(`Program ${program} success`);
    }
    const balances = (state: Map<string, TokenAccountState>) =>
      keys.flatMap((key, accountIndex) => {
        const account = state.get(key.toBase58());
        if (!account) return [];
        const { mint, owner, programId, amountBaseUnits } = account;
        return [{ accountIndex, mint, owner, programId, amountBaseUnits, decimals: this.decimalsOf(mint) }];
      });
    const pre = balances(this.accounts);
    if (failed) {
      const { index, error } = failed;
      return {
        err: { InstructionError: [index, error] },
        failure: { index, message: inWords(error) },
        logs,
        preTokenBalances: pre,
        postTokenBalances: pre,
        commit: () => undefined,
      };
    }
    return {
      err: null,
      logs,
      preTokenBalances: pre,
      postTokenBalances: balances(working),
      commit: () => {
        this.accounts.clear();
        for (const [k, v] of working) this.accounts.set(k, v);
      },
    };
  }

  private decimalsOf(mint: string): number {
    return this.mints.get(mint)?.decimals ?? 0;
  }

  private run(ix: TransactionInstruction, state: Map<string, TokenAccountState>, logs: string[]): ProgramError | null {
    const program = ix.programId.toBase58();
    if (MEMO_PROGRAMS.has(program)) {
      logs.push(`Program log: Memo (len ${ix.data.length}): ${JSON.stringify(new TextDecoder().decode(ix.data))}`);
      return null;
    }
    if (ix.programId.equals(ComputeBudgetProgram.programId)) return null;
    if (ix.programId.equals(ASSOCIATED_TOKEN_PROGRAM_ID)) return this.createAssociated(ix, state, logs);
    if (TOKEN_PROGRAMS.has(program) && (ix.data[0] === 3 || ix.data[0] === 12)) return this.transfer(ix, state, logs);
    throw new UnsupportedByFake(
      `the fake Solana RPC executes only token transfers, associated token accounts, memos and compute budgets, not instruction ${ix.data[0]} of ${program}`,
    );
  }

  /** The Associated Token Account program's Create (data empty or 0) and CreateIdempotent (1). */
  private createAssociated(ix: TransactionInstruction, state: Map<string, TokenAccountState>, logs: string[]): ProgramError | null {
    const kind = ix.data[0] ?? 0;
    if (kind > 1) throw new UnsupportedByFake(`the fake Solana RPC does not execute associated token account instruction ${kind}`);
    logs.push(`Program log: ${kind === 1 ? "CreateIdempotent" : "Create"}`);
    const [payer, account, owner, mint, , tokenProgram] = ix.keys;
    if (!payer || !account || !owner || !mint || !tokenProgram) return "NotEnoughAccountKeys";
    const existing = state.get(account.pubkey.toBase58());
    if (existing && kind === 1) {
      // Idempotent: an existing account must be the one the seeds name.
      return existing.owner === owner.pubkey.toBase58() && existing.mint === mint.pubkey.toBase58() ? null : "IllegalOwner";
    }
    const expected = getAssociatedTokenAddressSync(mint.pubkey, owner.pubkey, true, tokenProgram.pubkey);
    if (!expected.equals(account.pubkey)) return "InvalidSeeds";
    if (existing) return ACCOUNT_ALREADY_IN_USE;
    if (!payer.isSigner) return "MissingRequiredSignature";
    if (!this.mints.has(mint.pubkey.toBase58())) return "IncorrectProgramId";
    state.set(account.pubkey.toBase58(), {
      mint: mint.pubkey.toBase58(),
      owner: owner.pubkey.toBase58(),
      programId: tokenProgram.pubkey.toBase58(),
      amountBaseUnits: 0n,
    });
    return null;
  }

  /** SPL Token's Transfer (3) and TransferChecked (12), single-signer authority. */
  private transfer(ix: TransactionInstruction, state: Map<string, TokenAccountState>, logs: string[]): ProgramError | null {
    const checked = ix.data[0] === 12;
    logs.push(`Program log: Instruction: ${checked ? "TransferChecked" : "Transfer"}`);
    let decoded: {
      source: string;
      destination: string;
      owner: { key: string; isSigner: boolean };
      amount: bigint;
      mint?: string;
      decimals?: number;
    };
    try {
      if (checked) {
        const { keys, data } = decodeTransferCheckedInstruction(ix, ix.programId);
        const owner = { key: keys.owner.pubkey.toBase58(), isSigner: keys.owner.isSigner };
        decoded = {
          source: keys.source.pubkey.toBase58(),
          destination: keys.destination.pubkey.toBase58(),
          owner,
          amount: data.amount,
          mint: keys.mint.pubkey.toBase58(),
          decimals: data.decimals,
        };
      } else {
        const { keys, data } = decodeTransferInstruction(ix, ix.programId);
        const owner = { key: keys.owner.pubkey.toBase58(), isSigner: keys.owner.isSigner };
        decoded = {
          source: keys.source.pubkey.toBase58(),
          destination: keys.destination.pubkey.toBase58(),
          owner,
          amount: data.amount,
        };
      }
    } catch {
      return "InvalidInstructionData";
    }
    const source = state.get(decoded.source);
    const destination = state.get(decoded.destination);
    // The token program's order of checks: both accounts, funds, mints, decimals, then the authority.
    if (!source || !destination) return "InvalidAccountData";
    if (source.amountBaseUnits < decoded.amount) {
      logs.push("Program log: Error: insufficient funds");
      return INSUFFICIENT_FUNDS;
    }
    if (source.mint !== destination.mint) return MINT_MISMATCH;
    if (decoded.mint !== undefined) {
      if (decoded.mint !== source.mint) return MINT_MISMATCH;
      if (decoded.decimals !== this.decimalsOf(source.mint)) return MINT_DECIMALS_MISMATCH;
    }
    if (decoded.owner.key !== source.owner) return OWNER_MISMATCH;
    // The program treats the keys after the authority as multisig signers only when the
    // authority is a multisig account (the fake holds none); otherwise it ignores them,
    // which is how Solana Pay's read-only `reference` keys ride on a transfer.
    if (!decoded.owner.isSigner) return "MissingRequiredSignature";
    source.amountBaseUnits -= decoded.amount;
    destination.amountBaseUnits += decoded.amount;
    return null;
  }
}
