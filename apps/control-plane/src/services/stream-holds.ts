import { ApiError } from "../errors";
import type { AccessGrant } from "./auth-service";
import type { GrantEnd, GrantWatch } from "./grant-watch";

export type StreamLimits = {
  /** Streams one account may hold open at once (on this replica). */
  perAccount: number;
  /** Streams one deployment may have open at once (on this replica). */
  perDeployment: number;
};

/** An open stream's slot and its watch on the sign-in that opened it. */
export interface StreamHold {
  /** Resolves when the stream must end because its sign-in is over (never, once released). */
  readonly ended: Promise<GrantEnd>;
  /** The stream closed: its slot is free again. Idempotent. */
  release(): void;
}

/** What a client is told to wait before trying again past a cap: as long as an exec refusal says. */
const RETRY_AFTER_S = 5;

/**
 * Who may hold a Server-Sent Events stream (logs/stream, events) and for how
 * long: a slot per stream under a cap per account and per deployment, taken
 * before the stream opens (past a cap the request is RATE_LIMITED with
 * Retry-After) and given back when it closes; and the stream ends when the
 * sign-in that opened it is over (see GrantWatch). Each stream holds a socket
 * and its buffers: without a cap one account could hold the process's file
 * limit.
 */
export class StreamHolds {
  private readonly ofAccount = new Map<string, number>();
  private readonly ofDeployment = new Map<string, number>();

  constructor(private readonly o: { grants: GrantWatch; limits: StreamLimits }) {}

  /** A slot for a stream of `deploymentId` opened with `grant`, or RATE_LIMITED. */
  open(grant: AccessGrant, deploymentId: string): StreamHold {
    const { perAccount, perDeployment } = this.o.limits;
    if (this.streamsOfAccount(grant.userId) >= perAccount)
      throw refusal(`this account has ${perAccount} streams open, the most it may: close one first`, perAccount);
    if (this.streamsOfDeployment(deploymentId) >= perDeployment)
      throw refusal(`deployment ${deploymentId} has ${perDeployment} streams open, the most it may: close one first`, perDeployment);
    bump(this.ofAccount, grant.userId, 1);
    bump(this.ofDeployment, deploymentId, 1);
    let end!: (why: GrantEnd) => void;
    const ended = new Promise<GrantEnd>((resolve) => (end = resolve));
    const watch = this.o.grants.hold(grant, (why) => end(why));
    let released = false;
    return {
      ended,
      release: () => {
        if (released) return;
        released = true;
        watch.release();
        bump(this.ofAccount, grant.userId, -1);
        bump(this.ofDeployment, deploymentId, -1);
      },
    };
  }

  streamsOfAccount(userId: string): number {
    return this.ofAccount.get(userId) ?? 0;
  }

  streamsOfDeployment(deploymentId: string): number {
    return this.ofDeployment.get(deploymentId) ?? 0;
  }

  /** Streams open on this replica, all accounts together. */
  openCount(): number {
    let n = 0;
    for (const v of this.ofAccount.values()) n += v;
    return n;
  }
}

function bump(counts: Map<string, number>, key: string, by: number) {
  const n = (counts.get(key) ?? 0) + by;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
}

function refusal(message: string, limit: number) {
  return new ApiError("RATE_LIMITED", message, { limit, retryAfterSeconds: RETRY_AFTER_S }, { "Retry-After": String(RETRY_AFTER_S) });
}
