import { DepositWaitError } from "./errors";
import { type PollOptions, retrying, sleep } from "./follow";
import { call } from "./routes";
import type { Transport } from "./transport";
import type { DepositState, DepositStateResponse } from "./types";

export interface DepositWaitOptions extends PollOptions {
  /** Give up after this long with DepositWaitError WAIT_TIMEOUT (default 45 minutes: a deposit's life and the control plane's grace). */
  timeoutMs?: number;
  /** Called with the deposit each time its status changes, the first read included. */
  onChange?: (deposit: DepositState) => void;
}

/**
 * Reads the deposit every intervalMs (default 2 s, the control plane's watcher's
 * default tick) until the control plane credited it, however it was paid.
 */
export async function waitForDeposit(t: Transport, depositId: string, options: DepositWaitOptions = {}): Promise<DepositState> {
  const timeoutMs = options.timeoutMs ?? 45 * 60_000;
  const deadline = Date.now() + timeoutMs;
  let lastStatus: string | undefined;
  for (;;) {
    const { deposit } = await retrying(
      options,
      (): Promise<DepositStateResponse> => call(t, "get", "/credits/deposits/{id}", { auth: true, params: { id: depositId }, signal: options.signal }),
    );
    if (deposit.status !== lastStatus) options.onChange?.(deposit);
    lastStatus = deposit.status;
    if (deposit.status === "confirmed") return deposit;
    if (deposit.status === "expired") {
      // A payment that was found and refused is what the payer needs to hear about: it is why nothing was credited.
      const refused = deposit.refusal
        ? `; a payment (sig ${deposit.refusal.txSignature}) was refused: ${deposit.refusal.code} (${deposit.refusal.message})`
        : " (a payment made before then is still credited for a while: credits.deposit(id) shows it)";
      throw new DepositWaitError("DEPOSIT_EXPIRED", `deposit ${depositId} expired at ${deposit.expiresAt} with nothing credited${refused}`, deposit);
    }
    if (Date.now() >= deadline) throw new DepositWaitError("WAIT_TIMEOUT", `deposit ${depositId} was not credited in ${timeoutMs} ms`, deposit);
    await sleep(Math.min(options.intervalMs ?? 2_000, Math.max(0, deadline - Date.now())), options.signal);
  }
}
