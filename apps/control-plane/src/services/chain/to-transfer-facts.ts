import type { ParsedInstruction, ParsedTransactionWithMeta, PartiallyDecodedInstruction, TokenBalance } from "@solana/web3.js";
import type { TokenBalanceDelta, TokenTransfer, TransferFacts } from "./chain-client";

/**
 * Token (classic) and Token-2022: the node parses both as program "spl-token".
 * Written out rather than imported from @solana/spl-token: that package's only
 * use here would be these two constants, and loading it loads bigint-buffer,
 * which warns on every start that its native addon is not built. The tests check
 * these against the library's own.
 */
export const TOKEN_PROGRAM_ID = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA";
export const TOKEN_2022_PROGRAM_ID = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb";
export const TOKEN_PROGRAM_IDS: ReadonlySet<string> = new Set([TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID]);

// transferCheckedWithFee (Token-2022) carries the same fields as transferChecked.
const TRANSFER_TYPES: ReadonlySet<string> = new Set(["transfer", "transferChecked", "transferCheckedWithFee"]);

type AnyInstruction = ParsedInstruction | PartiallyDecodedInstruction;
type Info = Record<string, unknown>;

/**
 * Translates a jsonParsed `getTransaction` result into the facts a deposit check
 * needs. Pure: everything comes from the argument; amounts stay integer base units.
 */
export function toTransferFacts(parsed: ParsedTransactionWithMeta): TransferFacts {
  const meta = parsed.meta;
  const accountKeys = parsed.transaction.message.accountKeys.map((key) => key.pubkey.toBase58());
  const pre = meta?.preTokenBalances ?? [];
  const post = meta?.postTokenBalances ?? [];
  const balanceAt = (index: number): TokenBalance | undefined => post.find((b) => b.accountIndex === index) ?? pre.find((b) => b.accountIndex === index);

  const transfers: TokenTransfer[] = [];
  parsed.transaction.message.instructions.forEach((instruction, index) => {
    pushTransfer(transfers, instruction, accountKeys, balanceAt);
    // Inner instructions are the CPIs a top-level instruction made (routers, smart wallets).
    for (const inner of meta?.innerInstructions ?? []) {
      if (inner.index !== index) continue;
      for (const innerInstruction of inner.instructions) pushTransfer(transfers, innerInstruction, accountKeys, balanceAt);
    }
  });

  return {
    signature: parsed.transaction.signatures[0] ?? "",
    slot: parsed.slot,
    blockTimeMs: parsed.blockTime == null ? null : parsed.blockTime * 1000,
    // Without meta nothing proves the transaction succeeded, so it counts as failed.
    failed: meta === null || meta.err != null,
    transfers,
    tokenBalanceDeltas: toBalanceDeltas(pre, post, accountKeys),
    accountKeys,
  };
}

function pushTransfer(out: TokenTransfer[], instruction: AnyInstruction, accountKeys: string[], balanceAt: (index: number) => TokenBalance | undefined): void {
  if (!("parsed" in instruction) || !TOKEN_PROGRAM_IDS.has(instruction.programId.toBase58())) return;
  const parsed: unknown = instruction.parsed;
  if (!isRecord(parsed) || typeof parsed.type !== "string" || !TRANSFER_TYPES.has(parsed.type)) return;
  const info = parsed.info;
  if (!isRecord(info)) return;

  const source = stringField(info, "source");
  const destination = stringField(info, "destination");
  // A multisig-owned source names the multisig account instead of a single authority.
  const authority = stringField(info, "authority") ?? stringField(info, "multisigAuthority");
  const tokenAmount = isRecord(info.tokenAmount) ? info.tokenAmount : undefined;
  const amountBaseUnits = toBaseUnits(tokenAmount ? tokenAmount.amount : info.amount);
  if (source === undefined || destination === undefined || authority === undefined || amountBaseUnits === null) return;

  // Plain `transfer` names no mint: the destination's token balance entry knows it.
  const destinationIndex = accountKeys.indexOf(destination);
  const destinationBalance = destinationIndex >= 0 ? balanceAt(destinationIndex) : undefined;
  const mint = stringField(info, "mint") ?? destinationBalance?.mint;
  const decimals = tokenAmount && typeof tokenAmount.decimals === "number" ? tokenAmount.decimals : destinationBalance?.uiTokenAmount.decimals;
  // Without a mint the transfer proves nothing about what moved.
  if (mint === undefined || decimals === undefined) return;

  out.push({
    mint,
    source,
    destination,
    destinationOwner: destinationBalance?.owner ?? null,
    authority,
    amountBaseUnits,
    decimals,
  });
}

function toBalanceDeltas(pre: TokenBalance[], post: TokenBalance[], accountKeys: string[]): TokenBalanceDelta[] {
  const indexes = [...new Set([...pre, ...post].map((b) => b.accountIndex))].sort((a, b) => a - b);
  const deltas: TokenBalanceDelta[] = [];
  for (const accountIndex of indexes) {
    const before = pre.find((b) => b.accountIndex === accountIndex);
    const after = post.find((b) => b.accountIndex === accountIndex);
    const latest = after ?? before;
    const account = accountKeys[accountIndex];
    if (latest === undefined || account === undefined) continue;
    // A missing side means the account was created (no pre) or closed (no post) here.
    const beforeUnits = before ? toBaseUnits(before.uiTokenAmount.amount) : 0n;
    const afterUnits = after ? toBaseUnits(after.uiTokenAmount.amount) : 0n;
    if (beforeUnits === null || afterUnits === null) continue;
    deltas.push({
      account,
      accountIndex,
      owner: latest.owner ?? null,
      mint: latest.mint,
      deltaBaseUnits: afterUnits - beforeUnits,
      decimals: latest.uiTokenAmount.decimals,
    });
  }
  return deltas;
}

/** u64 amounts travel as decimal strings precisely so they never pass through a float. */
function toBaseUnits(value: unknown): bigint | null {
  return typeof value === "string" && /^\d{1,20}$/.test(value) ? BigInt(value) : null;
}

function stringField(info: Info, key: string): string | undefined {
  const value = info[key];
  return typeof value === "string" ? value : undefined;
}

function isRecord(value: unknown): value is Info {
  return typeof value === "object" && value !== null;
}
