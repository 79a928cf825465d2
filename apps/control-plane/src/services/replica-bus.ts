// The in-process notices (events.ts) carried between control-plane replicas
// that share one PostgreSQL database. A command issued on replica B (a stop, a
// start, a delete) must reach the node's agent, whose session may live on
// replica A; a log line stored by A must wake a follower on B; a sign-out on B
// must end A's streams. The state is in the database before any notice is sent
// (durable first); the notice names ids only, and the receiving replica reads
// what it needs. A notice lost (a replica's listening connection was down) is
// caught by the reads each consumer already does on a timer: the agent hub's
// sweep of recently moved deployments, the streams' fallback read, the grant
// watch's revocation check.
//
// Notices are coalesced: ids raised within one short window, or while the
// previous notice is on its way, go out together, so a burst of log frames is
// a few notices a second, not one per frame.
import { NOTICE_MAX_BYTES, type Notifier, type Repos } from "@cm/db";
import type { EventBus } from "./events";
import type { Logger } from "./logger";

/** The notices that cross replicas, each with its one-letter code on the wire. */
const TOPICS = {
  "deployment-changed": "d",
  "deployment-touched": "t",
  "logs-stored": "l",
  "node-changed": "n",
  "node-retired": "r",
  "family-revoked": "f",
} as const;
type Topic = keyof typeof TOPICS;
const BY_CODE = new Map(Object.entries(TOPICS).map(([topic, code]) => [code as string, topic as Topic]));

/** What an id may look like on the wire: ours are of this alphabet, so a space and a comma can separate them. */
const ID = /^[A-Za-z0-9_.:-]{1,128}$/;

/** How long ids gather before a notice goes: the wake-up's added latency at most, bursts folded into one. */
const GATHER_MS = 5;

export type ReplicaBusOptions = {
  notifier: Notifier;
  events: EventBus;
  repos: Repos;
  log: Logger;
  /** This process's id among the replicas: its own notices come back to it and are skipped. */
  replicaId: string;
};

/** Pure: a notice's payload for the pending ids, cut into payloads under the size PostgreSQL takes. */
export function encodeNotices(replicaId: string, pending: ReadonlyMap<Topic, ReadonlySet<string>>, maxBytes = NOTICE_MAX_BYTES): string[] {
  const out: string[] = [];
  let current = replicaId;
  for (const [topic, ids] of pending) {
    for (const id of ids) {
      const part = ` ${TOPICS[topic]}:${id}`;
      if (current.length + part.length > maxBytes && current !== replicaId) {
        out.push(current);
        current = replicaId;
      }
      current += part;
    }
  }
  if (current !== replicaId) out.push(current);
  return out;
}

/** Pure: who sent a payload and what it names; undefined parts are skipped (a newer replica's topic, a malformed id). */
export function decodeNotice(payload: string): { from: string; items: Array<{ topic: Topic; id: string }> } {
  const [from = "", ...parts] = payload.split(" ");
  const items: Array<{ topic: Topic; id: string }> = [];
  for (const part of parts) {
    const topic = BY_CODE.get(part.slice(0, 1));
    const id = part.slice(2);
    if (topic && part[1] === ":" && ID.test(id)) items.push({ topic, id });
  }
  return { from, items };
}

export class ReplicaBus {
  private pending = new Map<Topic, Set<string>>();
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  /** True while a notice from another replica is being re-raised here: it must not be sent back out. */
  private relaying = false;
  private closed = false;
  private failing = false;
  /** Notices sent and received, and the wake-ups' delay from raise to send: for /metrics and tests. */
  readonly counts = { sent: 0, received: 0, failed: 0 };

  get replicaId(): string {
    return this.o.replicaId;
  }

  constructor(private readonly o: ReplicaBusOptions) {
    for (const topic of Object.keys(TOPICS) as Topic[]) {
      o.events.on(topic, (arg: { id: string } | string) => {
        if (this.relaying) return;
        this.raise(topic, typeof arg === "string" ? arg : arg.id);
      });
    }
  }

  /** Starts listening; resolves once the listening connection is up. */
  async start(onListening: () => void = () => undefined): Promise<void> {
    await this.o.notifier.listen(
      (payload) => void this.receive(payload).catch((err) => this.o.log.error("replicas: a notice could not be handled", { err })),
      onListening,
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    await this.sending;
    await this.o.notifier.close();
  }

  private raise(topic: Topic, id: string) {
    if (this.closed || !ID.test(id)) return;
    const ids = this.pending.get(topic) ?? new Set<string>();
    this.pending.set(topic, ids.add(id));
    if (!this.timer && !this.sending) this.timer = setTimeout(() => void this.flush(), GATHER_MS);
  }

  private async flush() {
    this.timer = undefined;
    const pending = this.pending;
    this.pending = new Map();
    this.sending = (async () => {
      for (const payload of encodeNotices(this.o.replicaId, pending)) {
        try {
          await this.o.notifier.notify(payload);
          this.counts.sent++;
          this.failing = false;
        } catch (err) {
          // The change is in the database: the other replicas' periodic reads will find it.
          // Said once per outage, not once per notice.
          this.counts.failed++;
          if (!this.failing) this.o.log.warn("replicas: wake-ups cannot be sent; the other replicas catch up at their periodic reads until they can", { err });
          this.failing = true;
        }
      }
    })();
    await this.sending;
    this.sending = undefined;
    if (this.pending.size > 0 && !this.closed) this.timer = setTimeout(() => void this.flush(), GATHER_MS);
  }

  private async receive(payload: string) {
    const { from, items } = decodeNotice(payload);
    if (from === this.o.replicaId || items.length === 0) return;
    this.counts.received++;
    const changed = items.filter((i) => i.topic === "deployment-changed").map((i) => i.id);
    // Read once for all the notice names: the rows as they are now, deleted ones included.
    const rows = new Map((await this.o.repos.deployments.byIds(changed)).map((r) => [r.id, r]));
    this.relaying = true;
    try {
      for (const { topic, id } of items) {
        if (topic === "deployment-changed") {
          const row = rows.get(id);
          if (row) this.o.events.emit("deployment-changed", row);
        } else this.o.events.emit(topic, id);
      }
    } finally {
      this.relaying = false;
    }
  }
}
