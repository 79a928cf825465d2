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
};

/** What a PAYOUTS=auto request past the day's room says while it waits. */
export const WAITING_FOR_LIMIT =
  "waiting for room under this installation's daily payout limit (PAYOUT_DAILY_LIMIT_CREDITS, over any 24 hours); sent as soon as there is";
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

  async function note(p: PayoutRow, error: string | null) {
    if (p.error === error) return;
    await repos.payouts.noteError(p.id, error, clock.now());
  }

  /** Signs a new transfer in place of `p.signature`, records it, then sends it. */
  async function attempt(p: PayoutRow) {
    const latest = await chain.latestBlockhash();
    if (latest.kind === "unavailable") return note(p, `waiting for the Solana RPC: ${latest.reason}`);
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
    await note(p, sent.kind === "refused" ? `the RPC refused the transfer: ${sent.reason}` : `waiting for the Solana RPC: ${sent.reason}`);
  }

  /** The recorded transfer can never land (expired unseen, or landed and failed): another, or give up. */
  async function again(p: PayoutRow, reason: string) {
    if (p.attempt >= o.maxAttempts) {
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
    if (height.kind === "unavailable") return note(p, `waiting for the Solana RPC: ${height.reason}`);
    const state = await chain.status(p.signature);
    if (state.kind === "unavailable") return note(p, `waiting for the Solana RPC: ${state.reason}`);
    if (state.kind === "landed" && !state.failed) {
      const row = changed(await repos.payouts.markPaid(p.id, p.signature, clock.now()));
      if (row) log.info("payout: paid", { payoutId: p.id, signature: p.signature, attempt: p.attempt });
      return;
    }
    if (state.kind === "landed") return again(p, `the transfer ${p.signature} failed on chain (${state.error}); nothing moved`);
    if (state.kind === "landing") return;
    if (height.height <= p.lastValidBlockHeight!) return send(p);
    // "Unknown" from a node behind the one that said the height (a load balancer
    // in front of several, a lagging one) may miss a transfer that landed.
    if (state.contextSlot < height.slot)
      return note(p, `waiting for the Solana RPC: the node that answered is at slot ${state.contextSlot}, behind ${height.slot}`);
    return again(p, `the transfer ${p.signature} expired without landing${p.error ? ` (last: ${p.error})` : ""}`);
  }

  async function runTick() {
    const nowMs = clock.now();
    if (o.mode === "auto") for (const row of await repos.payouts.approveWithinDailyLimit(nowMs, o.dailyLimitMicro, WAITING_FOR_LIMIT)) changed(row);
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
  let timer: NodeJS.Timeout | undefined;
  return {
    tick,
    start() {
      if (o.intervalMs === 0) return;
      timer ??= setInterval(() => void tick().catch((err) => log.error("payout sender: a turn failed", { err })), o.intervalMs);
      timer.unref();
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
      await turns.idle();
      // Another replica may go on at once rather than wait the lease out.
      await repos.payouts.release(o.owner).catch(() => undefined);
    },
  };
}
export type PayoutSender = ReturnType<typeof createPayoutSender>;
