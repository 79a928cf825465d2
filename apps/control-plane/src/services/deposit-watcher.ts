import type { DepositRow, Repos } from "@cm/db";
import { type DepositRefusalCode, KeyedQueue } from "@cm/protocol";
import { PublicKey } from "@solana/web3.js";
import type { ChainClient, TransferFacts } from "./chain/chain-client";
import { findPaymentByReference } from "./chain/find-payment";
import { verifyDeposit } from "./chain/verify-deposit";
import { expectedPayment } from "./deposit-service";
import type { Clock, IdGenerator } from "./ids";
import type { Logger } from "./logger";

/**
 * Credits deposits whose payment names their Solana Pay reference, with no call
 * from the client: a phone wallet that pays and closes is credited all the same.
 *
 * Its cost follows the payments, never the open deposits. Each tick lists the
 * treasury's token account (every payment to the treasury names it) from the last
 * transaction it read on (`until`), reads those transactions, oldest first, and
 * looks up the open deposits whose reference each one names, in the reference's
 * unique index. Plus a few open deposits per tick in turn, searched by reference
 * (a walk over all of them by deposits_open_idx, a page a tick), which catches what
 * the listing cannot (a payment to another token account of the treasury, more
 * transactions than a listing holds). It used to read the 5,000 oldest open deposits
 * every tick and match only those: with 5,000 open (issue 36) a newer deposit paid
 * by reference stayed pending, and re-reading them took half a core. A deposit is
 * watched until its expiresAt plus the grace; credits go through
 * repos.deposits.confirm, the confirm route's own call, so the two never credit twice.
 */

/** Signatures one listing of the treasury's token account holds: the RPC's largest page. */
const TREASURY_LISTING = 1_000;
/** Treasury transactions read (getTransaction) per tick, oldest first; the rest wait for the next tick. */
const READS_PER_TICK = 100;
/** Open deposits searched by reference per tick whatever the listing said, in turn. */
export const SWEEP_PER_TICK = 5;
/** Ticks a listed transaction the node does not serve yet is asked for again before it is left to the sweep. */
const UNSERVED_TRIES = 30;
/** How far a block time may run behind the control plane's clock. */
const CLOCK_SKEW_MS = 5 * 60_000;

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
  /** A deposit's lifetime: no watched deposit was opened longer ago than this plus the grace. */
  ttlS: number;
  graceS: number;
  /** 0: no timer (deposits credit by confirm, or by tick() in tests). */
  intervalMs: number;
};

/** What a transaction (or a search by reference) says of one deposit. */
type Finding = { kind: "paid"; signature: string } | { kind: "refused"; signature: string; code: DepositRefusalCode };

export function createDepositWatcher(o: DepositWatcherOptions) {
  const { repos, chain, clock, ids, log } = o;
  // The newest treasury transaction read with every one before it; the next listing starts after it.
  let cursor: string | undefined;
  // Transactions read past the cursor (one before them is not read yet).
  let readPastCursor = new Set<string>();
  // Listed transactions the node did not serve yet, and how many ticks it did not.
  const unserved = new Map<string, number>();
  // Where the sweep goes on: the expiresAt it reached, and the deposits of that very expiresAt it searched.
  let sweepFrom: { expiresAt: number; searched: Set<string> } | undefined;
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

  /** Records what was found of `d`; answers whether it is confirmed now (by this payment or another). */
  async function apply(d: DepositRow, finding: Finding): Promise<boolean> {
    if (finding.kind === "refused") {
      log.info("deposit watcher: a transaction names the reference and does not pay", { depositId: d.id, code: finding.code });
      // So the deposit says why nothing was credited (a payment after expiresAt, too little); a valid payment later still credits it.
      if (d.refusalCode !== finding.code || d.refusalSignature !== finding.signature) await repos.deposits.recordRefusal(d.id, finding.code, finding.signature);
      return false;
    }
    const outcome = await repos.deposits.confirm(d.id, finding.signature, ids("txn"), clock.now());
    // Anything else means the confirm route (or another replica) got there first, or the payment credited another deposit.
    if (outcome.kind === "credited") log.info("deposit watcher: credited", { depositId: d.id, signature: finding.signature });
    return outcome.kind === "credited" || outcome.kind === "already_confirmed";
  }

  /** Settles the open deposits whose reference `tx` names, each paid or refused by it; adds those confirmed to `confirmed`. */
  async function settleNamed(tx: TransferFacts, watchedSinceMs: number, confirmed: Set<string>) {
    for (const d of await repos.deposits.openByReferences(tx.accountKeys, watchedSinceMs)) {
      const verdict = verifyDeposit(tx, expectedPayment(d));
      const finding: Finding = verdict.ok ? { kind: "paid", signature: tx.signature } : { kind: "refused", signature: tx.signature, code: verdict.code };
      if (await apply(d, finding)) confirmed.add(d.id);
    }
  }

  /** Reads the treasury's transactions from the cursor on, oldest first, and settles the deposits they name. */
  async function readTreasury(account: string, nowMs: number, watchedSinceMs: number, confirmed: Set<string>) {
    const listed = await chain.signaturesFor(account, TREASURY_LISTING, cursor);
    if (listed.kind === "unavailable") {
      log.warn("deposit watcher: the RPC did not list the treasury's transactions", { reason: listed.reason });
      return;
    }
    if (cursor && listed.signatures.length === TREASURY_LISTING)
      log.warn("deposit watcher: more treasury transactions since the last tick than one listing holds; the older ones are left to the sweep");
    // Landed before every watched deposit was opened: it cannot name one's fresh reference.
    const landedTooEarlyMs = nowMs - (o.ttlS + o.graceS) * 1000 - CLOCK_SKEW_MS;
    const nextReadPastCursor = new Set<string>();
    let reads = 0;
    let unbroken = true;
    for (const entry of listed.signatures) {
      const { signature } = entry;
      let done = readPastCursor.has(signature) || entry.failed || (entry.blockTimeMs !== null && entry.blockTimeMs < landedTooEarlyMs);
      if (!done && reads < READS_PER_TICK) {
        reads++;
        const lookup = await chain.getTransfer(signature);
        if (lookup.kind === "found") {
          await settleNamed(lookup.tx, watchedSinceMs, confirmed);
          done = true;
        } else if (lookup.kind === "unavailable") {
          log.warn("deposit watcher: the RPC did not answer", { signature, reason: lookup.reason });
          reads = READS_PER_TICK;
        } else {
          // Listed and not served: the node's indexes disagree for a moment; read it again next tick, for a while.
          const tries = (unserved.get(signature) ?? 0) + 1;
          unserved.set(signature, tries);
          done = tries >= UNSERVED_TRIES;
          if (done) log.warn("deposit watcher: a listed treasury transaction is still not served; left to the sweep", { signature });
        }
      }
      if (done) unserved.delete(signature);
      if (done && unbroken) cursor = signature;
      else if (done) nextReadPastCursor.add(signature);
      else unbroken = false;
    }
    readPastCursor = nextReadPastCursor;
  }

  /** The next SWEEP_PER_TICK open deposits, soonest to expire first; from the first again after the last. */
  async function nextSweepPage(watchedSinceMs: number) {
    const resumed = sweepFrom && sweepFrom.expiresAt >= watchedSinceMs ? sweepFrom : undefined;
    const from = resumed ?? { expiresAt: watchedSinceMs, searched: new Set<string>() };
    // Deposits expiring in the same millisecond come in any order: ask for those searched too, and leave them out.
    const rows = await repos.deposits.openFrom(from.expiresAt, SWEEP_PER_TICK + from.searched.size);
    const page = rows.filter((d) => !from.searched.has(d.id)).slice(0, SWEEP_PER_TICK);
    const last = page.at(-1);
    if (!last || page.length < SWEEP_PER_TICK) sweepFrom = undefined;
    else {
      const searched = last.expiresAt === from.expiresAt ? from.searched : new Set<string>();
      for (const d of page) if (d.expiresAt === last.expiresAt) searched.add(d.id);
      sweepFrom = { expiresAt: last.expiresAt, searched };
    }
    return { page, fromFirst: !resumed };
  }

  /** Searches these open deposits by reference. */
  async function sweep(page: Array<DepositRow & { reference: string }>) {
    for (const d of page) {
      const search = await findPaymentByReference(chain, d.reference, expectedPayment(d));
      if (search.kind === "unavailable") return log.warn("deposit watcher: the RPC did not answer", { depositId: d.id, reason: search.reason });
      if (search.kind === "paid" || search.kind === "refused") await apply(d, search);
    }
  }

  async function runTick() {
    const account = treasury();
    if (!account) return;
    const nowMs = clock.now();
    const watchedSinceMs = nowMs - o.graceS * 1000;
    const { page, fromFirst } = await nextSweepPage(watchedSinceMs);
    if (page.length === 0 && fromFirst) {
      // Nothing open: no call to the RPC. What lands meanwhile pays nothing, so the next listing starts from the newest.
      cursor = undefined;
      readPastCursor = new Set();
      unserved.clear();
      return;
    }
    const confirmed = new Set<string>();
    await readTreasury(account, nowMs, watchedSinceMs, confirmed);
    await sweep(page.filter((d) => !confirmed.has(d.id)));
  }

  // Ticks run one after another: one started while another runs waits for it.
  const ticks = new KeyedQueue();
  const tick = () => ticks.run("tick", runTick);
  let stopTimer: (() => void) | undefined;
  return {
    tick,
    start() {
      if (o.intervalMs === 0) return;
      stopTimer ??= clock.every(o.intervalMs, () => void tick().catch((err) => log.error("deposit watcher: tick failed", { err })));
    },
    async stop() {
      stopTimer?.();
      stopTimer = undefined;
      await ticks.idle();
    },
  };
}
export type DepositWatcher = ReturnType<typeof createDepositWatcher>;
