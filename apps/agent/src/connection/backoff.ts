// Reconnection delays: exponential tiers with full jitter (AWS's "full jitter"),
// so a control-plane restart is not answered by every agent in the same instant.

export interface BackoffPolicy {
  initialMs: number;
  maxMs: number;
}

/** The ceiling of attempt n (0-based): initialMs doubling per attempt, capped at maxMs. */
export function backoffCeilingMs(attempt: number, policy: BackoffPolicy): number {
  const exponent = Math.min(Math.max(attempt, 0), 30); // 2^30 overflows no cap we would choose
  return Math.min(policy.maxMs, policy.initialMs * 2 ** exponent);
}

/** A uniformly random delay in [0, ceiling]; `random` returns [0, 1) like Math.random. */
export function backoffDelayMs(attempt: number, policy: BackoffPolicy, random: () => number): number {
  return Math.round(random() * backoffCeilingMs(attempt, policy));
}
