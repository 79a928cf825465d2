import { PayoutWaitError } from "./errors";
import { type PollOptions, retrying, sleep } from "./follow";
import { call } from "./routes";
import type { Transport } from "./transport";
import type { Payout, PayoutResponse, PayoutStatus } from "./types";

export interface PayoutWaitOptions extends PollOptions {
  /**
   * Give up after this long with PayoutWaitError WAIT_TIMEOUT (default 15 minutes: the
   * control plane signs up to five transfers, each valid for about 150 blocks, a minute
   * or so, before it calls a payout failed). Under PAYOUTS=manual a payout waits for an
   * administrator, which may take longer: the payout goes on regardless.
   */
  timeoutMs?: number;
  /** Called with the payout each time its status changes, the first read included. */
  onChange?: (payout: Payout) => void;
}

/** Where a payout rests: the USDC arrived, or nothing moved and its credits are available again. */
const SETTLED: readonly PayoutStatus[] = ["paid", "failed"];

/**
 * Reads the payout every intervalMs (default 2 s, the control plane's sender's
 * default turn) until it is paid or failed, and answers it as it is then: a
 * failed payout is an answer (its `error` says why), not a throw.
 */
export async function waitForPayout(t: Transport, payoutId: string, options: PayoutWaitOptions = {}): Promise<Payout> {
  const timeoutMs = options.timeoutMs ?? 15 * 60_000;
  const deadline = Date.now() + timeoutMs;
  let lastStatus: string | undefined;
  for (;;) {
    const { payout } = await retrying(
      options,
      (): Promise<PayoutResponse> => call(t, "get", "/operator/payouts/{id}", { auth: true, params: { id: payoutId }, signal: options.signal }),
    );
    if (payout.status !== lastStatus) options.onChange?.(payout);
    lastStatus = payout.status;
    if (SETTLED.includes(payout.status)) return payout;
    if (Date.now() >= deadline) {
      const why = payout.error ? ` (${payout.error})` : "";
      throw new PayoutWaitError(
        `payout ${payoutId} was neither paid nor failed in ${timeoutMs} ms: it is ${payout.status}${why}, and goes on without the wait`,
        payout,
      );
    }
    await sleep(Math.min(options.intervalMs ?? 2_000, Math.max(0, deadline - Date.now())), options.signal);
  }
}
