import type { PayoutRow, Repos } from "@cm/db";
import { KeyedQueue } from "@cm/protocol";
import type { Keypair } from "@solana/web3.js";
import type { PayoutChain } from "./chain/payout-chain";
import { signPayoutTransfer } from "./chain/payout-transfer";
import type { Clock } from "./ids";
import type { Logger } from "./logger";

/**
 * Sends approved payouts in USDC, each exactly once, whatever fails and when.
 *
 * The rule that makes it so: a transfer is signed and recorded on the payout's
 * row (signature, bytes, last valid block height) before it is sent, and a new
 * one is built only when the chain's finalized block height is past the recorded
 * one's last valid height and the chain, asked afterwards, does not know its
 * signature: from then on it can never land. Until then the recorded bytes are
 * sent again as they are (the chain takes one signature once). A crash anywhere,
 * a timeout, a lost answer or "blockhash not found" changes nothing: whoever
 * holds the payout next asks the chain about the recorded signature first.
 *
 * Each turn leases the payouts it works on (the row's lease), so two control
 * planes on one database do not both work on one; even if they did, each new
 * attempt replaces the signature the caller saw expire, compare-and-set, so
 * only one of them records it.
 */
export type PayoutSenderOptions = {
  repos: Repos;
  chain: PayoutChain;
  clock: Clock;
  log: Logger;
  /** The hot wallet paying out. */
  payer: Keypair;
  /** This process, as the leases name it. */
  owner: string;
  mode: "manual" | "auto";
  /** PAYOUTS=auto: what may be approved in any 24 hours. */
  dailyLimitMicro: number;
  /** 0: no timer (tests call tick()). */
  intervalMs: number;
  leaseMs: number;
  /** Transfers built for one payout before it fails (each seen expired without landing, or failed on chain). */
  maxAttempts: number;
  /** A payout changed: its operator's views (earnings, the list) refresh. */
  onChange?: (payout: PayoutRow) => void;
  /** Unapproved this long (an administrator's approval, or room under the daily limit), payouts are logged as a warning; WAIT_WARN_AFTER_MS by default. */
  waitWarnAfterMs?: number;
};

/** How long a payout may wait for its approval before the log says so. */
export const WAIT_WARN_AFTER_MS = 3_600_000;
/** A payout still waiting (on the RPC, or for its approval) is logged again at most this often. */
export const WAIT_LOG_EVERY_MS = 60_000;
/** Payouts one line about long approval waits names; it counts the rest. */
const WAITS_NAMED = 10;

/** What a PAYOUTS=auto request past the day's room says while it waits. */
export const WAITING_FOR_LIMIT =
  "waiting for room under this installation's daily payout limit (PAYOUT_DAILY_LIMIT_CREDITS, over any 24 hours); sent as soon as there is";
/** What a payout says (followed by the reason) while the chain cannot be asked or told. */
export const WAITING_FOR_RPC = "waiting for the Solana RPC";
/** What a PAYOUTS=manual request says until an administrator approves it. */
export const WAITING_FOR_APPROVAL = "waiting for an administrator to approve it (PAYOUTS=manual)";

/** Payouts one turn works on. */
const PER_TURN = 20;

export function createPayoutSender(o: PayoutSenderOptions) {
  const { repos, chain, clock, log } = o;
  const changed = (row: PayoutRow | undefined) => {
    if (row) o.onChange?.(row);
    return row;
  };

  // The API's `error` says what a payout waits for to its operator; the log says it to the
  // administrator, who is the one to act (issue 40: an unreachable RPC left payouts
  // `requested` for hours with nothing in the log).
  const loggedWaitAt = new Map<string, number>();
  let loggedApprovalsAt = Number.NEGATIVE_INFINITY;
  const waitWarnAfterMs = o.waitWarnAfterMs ?? WAIT_WARN_AFTER_MS;

  async function note(p: PayoutRow, error: string | null) {
    if (error?.startsWith(WAITING_FOR_RPC)) {
      const nowMs = clock.now();
      if (nowMs - (loggedWaitAt.get(p.id) ?? Number.NEGATIVE_INFINITY) >= WAIT_LOG_EVERY_MS) {
        loggedWaitAt.set(p.id, nowMs);
        log.warn("payout: waiting for the Solana RPC; nothing is sent until it answers", {
          payoutId: p.id,
          reason: error,
          requestedAt: new Date(p.requestedAt).toISOString(),
        });
      }
    } else loggedWaitAt.delete(p.id);
    if (p.error === error) return;
    await repos.payouts.noteError(p.id, error, clock.now());
  }

  /** Payouts unapproved for longer than waitWarnAfterMs, in one line at most once a minute. */
  async function logLongApprovalWaits(nowMs: number) {
    if (nowMs - loggedApprovalsAt < WAIT_LOG_EVERY_MS) return;
    loggedApprovalsAt = nowMs;
    const { rows, total } = await repos.payouts.unapprovedSince(nowMs - waitWarnAfterMs, WAITS_NAMED);
    if (total === 0) return;
    const minutes = Math.round(waitWarnAfterMs / 60_000);
    log.warn(
      o.mode === "manual"
        ? `payouts: ${total} waiting over ${minutes} min for an administrator's approval (cm-admin payouts list, then approve or reject)`
        : `payouts: ${total} waiting over ${minutes} min for room under the daily payout limit (PAYOUT_DAILY_LIMIT_CREDITS)`,
      {
        payouts: rows.map((p) => ({ payoutId: p.id, reason: p.error, waitingMin: Math.floor((nowMs - p.requestedAt) / 60_000) })),
        ...(total > rows.length ? { more: total - rows.length } : {}),
      },
    );
  }

  /** Signs a new transfer in place of `p.signature`, records it, then sends it. */
  async function attempt(p: PayoutRow) {
    const latest = await chain.latestBlockhash();
    if (latest.kind === "unavailable") return note(p, `${WAITING_FOR_RPC}: ${latest.reason}`);
    const { signature, signedTx } = signPayoutTransfer({
      payer: o.payer,
      mint: p.stableMint,
      decimals: p.stableDecimals,
      destinationOwner: p.walletAddress,
      amountBaseUnits: BigInt(p.amountStableBase),
      blockhash: latest.blockhash,
      payoutId: p.id,
      attempt: p.attempt + 1,
    });
    const row = changed(
      await repos.payouts.recordAttempt(p.id, o.owner, p.signature, { signature, signedTx, lastValidBlockHeight: latest.lastValidBlockHeight }, clock.now()),
    );
    // Someone else moved it on (another replica, or the lease ran out): theirs to finish.
    if (!row) return;
    log.info("payout: sending", { payoutId: p.id, attempt: row.attempt, signature });
    await send(row);
  }

  async function send(p: PayoutRow) {
    const sent = await chain.send(p.signedTx!);
    if (sent.kind === "sent") return note(p, null);
    log.warn("payout: the send was not taken; the chain is asked about it before anything else is sent", { payoutId: p.id, reason: sent.reason });
    await note(p, sent.kind === "refused" ? `the RPC refused the transfer: ${sent.reason}` : `${WAITING_FOR_RPC}: ${sent.reason}`);
  }

  /** The recorded transfer can never land (expired unseen, or landed and failed): another, or give up. */
  async function again(p: PayoutRow, reason: string) {
    if (p.attempt >= o.maxAttempts) {
      loggedWaitAt.delete(p.id);
      const row = changed(await repos.payouts.markFailed(p.id, p.signature, `${reason}; gave up after ${p.attempt} transfers, none landed`, clock.now()));
      if (row) log.error("payout: failed; its amount is available again", { payoutId: p.id, reason });
      return;
    }
    log.warn("payout: the transfer will never land; signing another", { payoutId: p.id, signature: p.signature, reason });
    await attempt({ ...p, error: reason });
  }

  async function advance(p: PayoutRow) {
    if (p.signature === null) return attempt(p);
    // The height first, then the status: a transfer that lands between the two
    // reads is then seen by the second, never taken for expired.
    const height = await chain.blockHeight();
    if (height.kind === "unavailable") return note(p, `${WAITING_FOR_RPC}: ${height.reason}`);
    const state = await chain.status(p.signature);
    if (state.kind === "unavailable") return note(p, `${WAITING_FOR_RPC}: ${state.reason}`);
    if (state.kind === "landed" && !state.failed) {
      loggedWaitAt.delete(p.id);
      const row = changed(await repos.payouts.markPaid(p.id, p.signature, clock.now()));
      if (row) log.info("payout: paid", { payoutId: p.id, signature: p.signature, attempt: p.attempt });
      return;
    }
    if (state.kind === "landed") return again(p, `the transfer ${p.signature} failed on chain (${state.error}); nothing moved`);
    if (state.kind === "landing") return;
    if (height.height <= p.lastValidBlockHeight!) return send(p);
    // "Unknown" from a node behind the one that said the height (a load balancer
    // in front of several, a lagging one) may miss a transfer that landed.
    if (state.contextSlot < height.slot) return note(p, `${WAITING_FOR_RPC}: the node that answered is at slot ${state.contextSlot}, behind ${height.slot}`);
    return again(p, `the transfer ${p.signature} expired without landing${p.error ? ` (last: ${p.error})` : ""}`);
  }

  async function runTick() {
    const nowMs = clock.now();
    if (o.mode === "auto") for (const row of await repos.payouts.approveWithinDailyLimit(nowMs, o.dailyLimitMicro, WAITING_FOR_LIMIT)) changed(row);
    await logLongApprovalWaits(nowMs);
    for (const claimed of await repos.payouts.claim(o.owner, nowMs, o.leaseMs, PER_TURN)) {
      try {
        // Renewed (and read afresh) just before its work: a turn's earlier payouts may have taken a while.
        const p = await repos.payouts.renew(claimed.id, o.owner, clock.now() + o.leaseMs);
        if (!p) continue;
        await advance(p);
      } catch (err) {
        // A database error: nothing is decided on it; the lease runs out and the next turn asks the chain again.
        log.error("payout: a turn failed", { payoutId: claimed.id, err });
      }
    }
  }

  // Turns run one after another: one started while another runs waits for it.
  const turns = new KeyedQueue();
  const tick = () => turns.run("tick", runTick);
  let stopTimer: (() => void) | undefined;
  return {
    tick,
    start() {
      if (o.intervalMs === 0) return;
      stopTimer ??= clock.every(o.intervalMs, () => void tick().catch((err) => log.error("payout sender: a turn failed", { err })));
    },
    async stop() {
      stopTimer?.();
      stopTimer = undefined;
      await turns.idle();
      // Another replica may go on at once rather than wait the lease out.
      await repos.payouts.release(o.owner).catch(() => undefined);
    },
  };
}
export type PayoutSender = ReturnType<typeof createPayoutSender>;
