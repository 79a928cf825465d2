import type { RpcError } from "./fake-rpc-send";

/**
 * Faults the fake RPC can be told to answer with, per JSON-RPC method (HTTP or
 * pubsub), so a test can break each step of a payment flow on its own.
 */
export type FakeFault =
  /** Answered with this JSON-RPC error; the call does nothing. */
  | { kind: "error"; error: RpcError }
  /** Never answered and does nothing: only the client's own timeout ends the call. */
  | { kind: "no-answer" }
  /**
   * The call takes effect (a sent transaction lands) but its answer never comes. For
   * `signatureSubscribe` the answer a subscriber waits for is the notification: the
   * subscription is acknowledged and never notified.
   */
  | { kind: "lost-answer" }
  /** sendTransaction: the node no longer knows the transaction's blockhash (preflight's -32002, or dropped unseen without preflight). */
  | { kind: "blockhash-not-found" }
  /** sendTransaction: answered with the signature, but no leader ever includes the transaction. */
  | { kind: "dropped" }
  /**
   * getSignatureStatuses: answered by a node `slots` behind the others (one
   * behind a load balancer): its context slot is that far back, and what
   * landed since is unknown to it.
   */
  | { kind: "behind"; slots: number };

export class FaultPlan {
  private readonly faults = new Map<string, { fault: FakeFault; left: number }>();

  /** The next `times` calls of `method` (every one until heal() when omitted) meet `fault`. */
  fail(method: string, fault: FakeFault, times = Number.POSITIVE_INFINITY): void {
    this.faults.set(method, { fault, left: times });
  }

  heal(method?: string): void {
    if (method === undefined) this.faults.clear();
    else this.faults.delete(method);
  }

  /** The fault this call of `method` meets, counting it; undefined when it is answered normally. */
  take(method: string): FakeFault | undefined {
    const planned = this.faults.get(method);
    if (!planned) return undefined;
    planned.left -= 1;
    if (planned.left <= 0) this.faults.delete(method);
    return planned.fault;
  }
}
