// Keeps the egress policy installed while the agent runs: at start, then on an
// interval, because a Docker restart, a firewalld reload or an operator's
// `iptables -F` can take it away without telling anyone; and at once when Docker
// comes back, the one of those the agent can notice. Deployments are admitted
// only while it is in place, unless the operator turned it off.
import type { Clock, TimerHandle } from "../clock";
import type { Logger } from "../logger";
import type { EngineRestarts } from "../runtime/docker-engine-events";
import type { Firewall } from "./iptables";

/** What tenants are told of the node (specs frame) and what `admit` goes by. */
export type EgressState = { mode: "enforced" } | { mode: "off" } | { mode: "missing"; reason: string };

export const DEFAULT_EGRESS_CHECK_MS = 30_000;

export interface EgressGuardOptions {
  firewall: Firewall;
  /** "off": the operator opted out (AGENT_EGRESS_POLICY=off); tenants are told */
  enabled: boolean;
  clock: Clock;
  logger: Logger;
  checkIntervalMs?: number;
  /** Docker, which rewrites its chains as it starts: each time it comes back the policy is checked without waiting for the interval */
  engine?: EngineRestarts;
}

export class EgressRefusedError extends Error {
  override readonly name = "EgressRefusedError";
}

export class EgressGuard {
  private current: EgressState = { mode: "missing", reason: "not checked yet" };
  private timer: TimerHandle | undefined;
  private ensuring: Promise<EgressState> | undefined;
  private running = false;
  private stopWatchingEngine: (() => void) | undefined;

  constructor(private readonly options: EgressGuardOptions) {}

  get state(): EgressState {
    return this.current;
  }

  /** Installs the policy (or notes that it is off) and keeps checking it. Never rejects: the state says how it went. */
  async start(): Promise<EgressState> {
    this.running = true;
    if (this.options.enabled) this.stopWatchingEngine ??= this.options.engine?.onEngineBack(() => this.onEngineBack());
    const state = await this.ensure();
    this.schedule();
    return state;
  }

  stop(): void {
    this.running = false;
    this.options.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.stopWatchingEngine?.();
    this.stopWatchingEngine = undefined;
  }

  /** Rejects with EgressRefusedError when a deployment must not start: the policy is on but not in place (one repair is tried first). */
  async admit(): Promise<void> {
    if (this.current.mode !== "missing") return;
    const state = await this.ensure();
    if (state.mode === "missing")
      throw new EgressRefusedError(`this node cannot enforce its network policy (${state.reason}), so it runs no deployments until its operator fixes it`);
  }

  /** Checks and repairs now (sharing a check already under way). */
  ensure(): Promise<EgressState> {
    this.ensuring ??= this.ensureOnce().finally(() => (this.ensuring = undefined));
    return this.ensuring;
  }

  private async ensureOnce(): Promise<EgressState> {
    const { firewall, logger } = this.options;
    const before = this.current;
    if (!this.options.enabled) {
      this.current = { mode: "off" };
      if (before.mode !== "off")
        logger.warn("The egress policy is off (AGENT_EGRESS_POLICY=off): tenants' containers can reach this machine and its network, and tenants are told so");
      return this.current;
    }
    try {
      const { changed } = await firewall.ensure();
      this.current = { mode: "enforced" };
      if (changed && before.mode === "enforced")
        logger.warn("The egress policy had been removed or changed on this machine (a Docker or firewall restart?); installed it again");
      else if (changed || before.mode !== "enforced") logger.info("Egress policy in place: tenants' containers reach the internet and DNS only");
    } catch (error) {
      const reason = (error as Error).message;
      this.current = { mode: "missing", reason };
      if (before.mode !== "missing" || before.reason !== reason) {
        logger.error("Cannot install the egress policy; no deployment will start until it is in place (or AGENT_EGRESS_POLICY=off)", { error: reason });
      }
    }
    return this.current;
  }

  private onEngineBack(): void {
    this.options.logger.info("Docker is back; checking the egress policy now, as Docker rewrites its firewall chains when it starts");
    // A check already under way may have looked before Docker rewrote them: one more after it.
    const underWay = this.ensuring;
    void (underWay ? underWay.then(() => this.ensure()) : this.ensure());
  }

  private schedule(): void {
    if (!this.running) return;
    this.timer = this.options.clock.setTimeout(() => {
      void this.ensure().then(() => this.schedule());
    }, this.options.checkIntervalMs ?? DEFAULT_EGRESS_CHECK_MS);
  }
}
