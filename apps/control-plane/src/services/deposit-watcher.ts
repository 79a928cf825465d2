import type { DepositRow, Repos } from "@cm/db";
import { KeyedQueue } from "@cm/protocol";
import { PublicKey } from "@solana/web3.js";
import type { ChainClient } from "./chain/chain-client";
import { findPaymentByReference } from "./chain/find-payment";
import { expectedPayment } from "./deposit-service";
import type { Clock, IdGenerator } from "./ids";
import type { Logger } from "./logger";

/**
 * Credits deposits whose payment names their Solana Pay reference, with no call
 * from the client: a phone wallet that pays and closes is credited all the same.
 *
 * Its cost follows the payments, not the open deposits. Each tick lists the
 * treasury's token account once (every payment to the treasury names it) and reads
 * only the transactions it has not seen; a deposit is searched by its reference
 * only when one of those names that reference, plus a few per tick in turn, which
 * catches what the listing missed (more new transactions than one page, an RPC
 * error). Matching on the reference rather than on the paying wallet keeps one
 * wallet with many open deposits from costing a search of each at every payment
 * it makes (1,000 open deposits of one wallet: 1,000 listings in a tick). A deposit is watched
 * until its expiresAt plus the grace; credits go through repos.deposits.confirm,
 * the confirm route's own call, so the two never credit twice.
 */

/** The newest transactions of the treasury's token account read per tick: one page of getSignaturesForAddress. */
export const TREASURY_PAGE = 100;
/** Deposits searched by reference per tick whatever the listing said, in turn. */
export const SWEEP_PER_TICK = 5;
/**
 * Deposits searched per tick because a new treasury transaction named their reference;
 * more wait for the next tick. One transaction can name as many references as it has
 * accounts (hundreds, with lookup tables), and each search is an RPC call or more.
 */
export const NAMED_PER_TICK = 50;
/** Open deposits one tick considers, oldest first. */
const MAX_OPEN = 5_000;
/** Signatures remembered as read; past this the oldest are forgotten (they have left the page by then). */
const SEEN_LIMIT = 10 * TREASURY_PAGE;

const TOKEN_PROGRAM = new PublicKey("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA");
const ASSOCIATED_TOKEN_PROGRAM = new PublicKey("ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL");

/** The token account a wallet receives `mint` in, as wallets (and @solana/pay's createTransfer) pay to it. */
export function associatedTokenAccount(owner: string, mint: string): string {
  const [address] = PublicKey.findProgramAddressSync(
    [new PublicKey(owner).toBuffer(), TOKEN_PROGRAM.toBuffer(), new PublicKey(mint).toBuffer()],
    ASSOCIATED_TOKEN_PROGRAM,
  );
  return address.toBase58();
}

export type DepositWatcherOptions = {
  repos: Repos;
  chain: ChainClient;
  clock: Clock;
  ids: IdGenerator;
  log: Logger;
  treasuryWallet: string;
  stableMint: string;
  graceS: number;
  /** 0: no timer (deposits credit by confirm, or by tick() in tests). */
  intervalMs: number;
};

export function createDepositWatcher(o: DepositWatcherOptions) {
  const { repos, chain, clock, ids, log } = o;
  const seen = new Set<string>();
  // References of open deposits that a treasury transaction named, not searched yet.
  const named = new Set<string>();
  let sweepFrom = 0;
  let treasuryAccount: string | null | undefined;

  function treasury(): string | null {
    if (treasuryAccount !== undefined) return treasuryAccount;
    try {
      treasuryAccount = o.treasuryWallet ? associatedTokenAccount(o.treasuryWallet, o.stableMint) : null;
    } catch (err) {
      log.error("deposit watcher: TREASURY_WALLET or STABLE_MINT is not a public key; watching nothing", { err });
      treasuryAccount = null;
    }
    return treasuryAccount;
  }

  function remember(signature: string) {
    seen.add(signature);
    if (seen.size > SEEN_LIMIT) seen.delete(seen.values().next().value!);
  }

  /** Reads the treasury's transactions not read before and notes the open deposits' references they name. */
  async function readNewTransactions(account: string, open: DepositRow[], references: ReadonlyMap<string, unknown>) {
    const listed = await chain.signaturesFor(account, TREASURY_PAGE);
    if (listed.kind === "unavailable") {
      log.warn("deposit watcher: the RPC did not list the treasury's transactions", { reason: listed.reason });
      return;
    }
    // Older than every open deposit: it cannot pay one (verifyDeposit would say so too).
    const oldestMs = Math.min(...open.map((d) => d.createdAt));
    for (const entry of listed.signatures) {
      if (seen.has(entry.signature)) continue;
      if (entry.failed || (entry.blockTimeMs !== null && entry.blockTimeMs < oldestMs - 60_000)) {
        remember(entry.signature);
        continue;
      }
      const lookup = await chain.getTransfer(entry.signature);
      // Not served yet or the RPC failed: read it again next tick.
      if (lookup.kind !== "found") continue;
      remember(entry.signature);
      for (const key of lookup.tx.accountKeys) if (references.has(key)) named.add(key);
    }
  }

  async function settle(d: DepositRow & { reference: string }) {
    const search = await findPaymentByReference(chain, d.reference, expectedPayment(d));
    if (search.kind === "unavailable") return log.warn("deposit watcher: the RPC did not answer", { depositId: d.id, reason: search.reason });
    if (search.kind === "refused") {
      log.info("deposit watcher: a transaction names the reference and does not pay", { depositId: d.id, code: search.code });
      // So the deposit says why nothing was credited (a payment after expiresAt, too little); a valid payment later still credits it.
      if (d.refusalCode !== search.code || d.refusalSignature !== search.signature) await repos.deposits.recordRefusal(d.id, search.code, search.signature);
    }
    if (search.kind !== "paid") return;
    const outcome = await repos.deposits.confirm(d.id, search.signature, ids("txn"), clock.now());
    // Anything else means the confirm route (or another replica) got there first, or the payment credited another deposit.
    if (outcome.kind === "credited") log.info("deposit watcher: credited", { depositId: d.id, signature: search.signature });
  }

  async function runTick() {
    const account = treasury();
    if (!account) return;
    const nowMs = clock.now();
    const open = await repos.deposits.openWithReference(nowMs - o.graceS * 1000, MAX_OPEN);
    if (open.length === 0) return;
    const byReference = new Map(open.map((d) => [d.reference, d]));
    await readNewTransactions(account, open, byReference);
    const due = new Map<string, DepositRow & { reference: string }>();
    for (const reference of named) {
      if (due.size >= NAMED_PER_TICK) break;
      named.delete(reference);
      const d = byReference.get(reference);
      // No longer open (credited by confirm, or past expiry plus the grace): nothing to search.
      if (d) due.set(d.id, d);
    }
    const sweep = Math.min(SWEEP_PER_TICK, open.length);
    for (let i = 0; i < sweep; i++) {
      const d = open[(sweepFrom + i) % open.length]!;
      due.set(d.id, d);
    }
    sweepFrom = (sweepFrom + sweep) % open.length;
    for (const d of due.values()) await settle(d);
  }

  // Ticks run one after another: one started while another runs waits for it.
  const ticks = new KeyedQueue();
  const tick = () => ticks.run("tick", runTick);
  let timer: NodeJS.Timeout | undefined;
  return {
    tick,
    start() {
      if (o.intervalMs === 0) return;
      timer ??= setInterval(() => void tick().catch((err) => log.error("deposit watcher: tick failed", { err })), o.intervalMs);
      timer.unref();
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
      await ticks.idle();
    },
  };
}
export type DepositWatcher = ReturnType<typeof createDepositWatcher>;
