// PostgreSQL's LISTEN/NOTIFY as the wake-up between control-plane replicas that
// share one database. Only ids travel (the state is already in the database, and
// a payload is bounded at 8000 bytes), on a connection of its own: a notice is
// never sent inside a hot write transaction, and listening never holds one of
// the pool's connections. A notice is a wake-up, not a delivery: one sent while
// a replica's listening connection was down is lost, and the replicas' periodic
// reads catch up on what it said.
import postgres from "postgres";

/** The channel every replica of one database listens on. */
export const REPLICA_CHANNEL = "cm_replicas";

/** The most a notice's payload holds (PostgreSQL's limit is 8000 bytes; a margin for the encoding). */
export const NOTICE_MAX_BYTES = 7900;

export interface Notifier {
  /** Sends one notice; resolves when the database took it, rejects if it could not (the caller logs and goes on). */
  notify(payload: string): Promise<void>;
  /** Calls `onNotice` for each notice on the channel (this replica's own included); `onListening` each time the listening connection is (re)established. */
  listen(onNotice: (payload: string) => void, onListening: () => void): Promise<void>;
  close(): Promise<void>;
}

/** A notifier for a PostgreSQL database; undefined for an embedded one, which serves one process. */
export function createNotifier(url: string): Notifier | undefined {
  if (!/^postgres(ql)?:\/\//.test(url)) return undefined;
  // max 1: postgres.js gives LISTEN a connection of its own besides; NOTIFY takes this one.
  const sql = postgres(url, { max: 1, onnotice: () => undefined, backoff: () => 1, connect_timeout: 10, idle_timeout: 0 });
  return {
    async notify(payload) {
      await sql.notify(REPLICA_CHANNEL, payload);
    },
    async listen(onNotice, onListening) {
      await sql.listen(REPLICA_CHANNEL, onNotice, onListening);
    },
    async close() {
      await sql.end({ timeout: 2 });
    },
  };
}
