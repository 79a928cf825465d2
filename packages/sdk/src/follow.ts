import type { ErrorBody, LOG_STREAM_END_EVENT, LOG_STREAM_ERROR_EVENT, TENANT_ACTIONS } from "@cm/protocol";
import { ApiError, NetworkError, WaitError } from "./errors";
import { call } from "./routes";
import { readSse } from "./sse";
import type { Transport } from "./transport";
import type { Deployment, DeploymentResponse, DeploymentStatus, LogEntry, LogsResponse } from "./types";

/** The statuses a deployment rests in once its run is over: what `start` accepts. */
export const ENDED_STATUSES = ["stopped", "exited", "failed"] as const;
// Tied to the protocol's list at compile time, without loading zod at run time for one array.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const _endedIsStartable: Same<(typeof ENDED_STATUSES)[number], (typeof TENANT_ACTIONS)["start"][number]> = true;
void _endedIsStartable;
// The protocol's word, typed from it (its value would load zod).
const END_EVENT: typeof LOG_STREAM_END_EVENT = "end";
const ERROR_EVENT: typeof LOG_STREAM_ERROR_EVENT = "error";
export const hasEnded = (status: DeploymentStatus) => (ENDED_STATUSES as readonly string[]).includes(status);

export interface PollOptions {
  /** Between two reads where the control plane has no stream route and is polled (default 1 s). */
  intervalMs?: number;
  signal?: AbortSignal;
}

export interface WaitOptions extends PollOptions {
  /** Give up after this long with WaitError WAIT_TIMEOUT (default 5 minutes). */
  timeoutMs?: number;
  /** Called with the deployment each time its status changes, the first read included. */
  onChange?: (deployment: Deployment) => void;
}

export interface FollowOptions extends PollOptions {
  /** Start with the last n lines (default 100). */
  tail?: number;
  /** Only lines at or after this time (ISO 8601). */
  since?: string;
}

/**
 * The deployment each time it changes (status, reason, exit code, endpoints, cost),
 * the current state first; ends after it reaches an ended status, and throws the
 * API's DEPLOYMENT_NOT_FOUND once it is deleted. Reads the events stream
 * (Server-Sent Events); a dropped connection or a restarting control plane is
 * waited out and the stream read again, whose current state is yielded only if it
 * changed meanwhile. A control plane without the events route is polled instead.
 */
export async function* watch(t: Transport, id: string, options: PollOptions = {}): AsyncGenerator<Deployment, void, undefined> {
  const path = `/deployments/${encodeURIComponent(id)}`;
  let last = "";
  for await (const step of resumingStream(t, `${path}/events`, { signal: options.signal })) {
    if (step.type === "unsupported") return yield* watchByPolling(t, id, options);
    if (step.type === "end") {
      // Deleted: the API's own answer for it (DEPLOYMENT_NOT_FOUND), as a read would have given.
      if ((JSON.parse(step.data) as { status: string }).status === "deleted") await retrying(options, () => getDeployment(t, id, options.signal));
      return;
    }
    if (step.data !== last) {
      last = step.data;
      yield JSON.parse(step.data) as Deployment;
    }
  }
}

const getDeployment = (t: Transport, id: string, signal: AbortSignal | undefined): Promise<DeploymentResponse> =>
  call(t, "get", "/deployments/{id}", { auth: true, params: { id }, signal });

/** The same by reading GET /deployments/:id every `intervalMs` (a control plane without the events route). */
export async function* watchByPolling(t: Transport, id: string, options: PollOptions = {}): AsyncGenerator<Deployment, void, undefined> {
  let last = "";
  for (;;) {
    const { deployment } = await retrying(options, () => getDeployment(t, id, options.signal));
    const seen = JSON.stringify(deployment);
    if (seen !== last) {
      last = seen;
      yield deployment;
    }
    if (hasEnded(deployment.status)) return;
    await sleep(options.intervalMs ?? 1_000, options.signal);
  }
}

/** Resolves the deployment once it has one of `status`; WaitError when it ends otherwise or time runs out. */
export async function waitFor(t: Transport, id: string, status: DeploymentStatus | DeploymentStatus[], options: WaitOptions = {}): Promise<Deployment> {
  const wanted: DeploymentStatus[] = Array.isArray(status) ? status : [status];
  const timeout = AbortSignal.timeout(options.timeoutMs ?? 300_000);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  let last: Deployment | undefined;
  let lastStatus: string | undefined;
  try {
    for await (const d of watch(t, id, { intervalMs: options.intervalMs, signal })) {
      last = d;
      if (d.status !== lastStatus) options.onChange?.(d);
      lastStatus = d.status;
      if (wanted.includes(d.status)) return d;
      if (hasEnded(d.status)) {
        const why = [d.statusReason, d.exitCode === null ? undefined : `exit code ${d.exitCode}`].filter(Boolean).join(", ");
        throw new WaitError("DEPLOYMENT_ENDED", `deployment ${id} is ${d.status}${why ? `: ${why}` : ""}`, d);
      }
    }
  } catch (err) {
    if (!timeout.aborted || options.signal?.aborted) throw err;
  }
  throw new WaitError(
    "WAIT_TIMEOUT",
    `deployment ${id} did not reach ${wanted.join(" or ")} in ${options.timeoutMs ?? 300_000} ms (it is ${last?.status ?? "unknown"})`,
    last,
  );
}

/**
 * Log lines as they come: the last `tail` first, then each new one once, until the
 * deployment has ended and its last lines are out. Reads the logs stream (Server-Sent
 * Events); a dropped connection or a restarting control plane is waited out and the
 * stream resumes after the last line read (Last-Event-ID), none lost or repeated.
 * A control plane without the stream route is polled instead.
 */
export async function* follow(t: Transport, id: string, options: FollowOptions = {}): AsyncGenerator<LogEntry, void, undefined> {
  const path = `/deployments/${encodeURIComponent(id)}/logs/stream`;
  for await (const step of resumingStream(t, path, { query: { tail: options.tail, since: options.since }, signal: options.signal })) {
    if (step.type === "unsupported") return yield* followByPolling(t, id, options);
    if (step.type === "end") return;
    yield JSON.parse(step.data) as LogEntry;
  }
}

/** What a resuming stream hands on: an event's data, its end event's data, or that the control plane has no such route. */
type StreamStep = { type: "message"; data: string } | { type: "end"; data: string } | { type: "unsupported" };

/**
 * A Server-Sent Events route read to its end event: a dropped connection or a
 * restarting control plane is waited out (backing off) and the route read again
 * from the last event id it gave (Last-Event-ID). "unsupported" when the first
 * request finds no such route (a control plane from before it). A stream the
 * server ended because its access token expired is read again at once (the
 * request refreshes the token); one whose sign-in was ended (UNAUTHORIZED)
 * throws that ApiError: reading on would need signing in again.
 */
async function* resumingStream(
  t: Transport,
  path: string,
  o: { query?: Record<string, string | number | undefined>; signal?: AbortSignal | undefined },
): AsyncGenerator<StreamStep> {
  let lastId: string | undefined;
  for (let attempt = 0; ; attempt++) {
    let res: Response;
    try {
      const headers: Record<string, string> = { accept: "text/event-stream", ...(lastId ? { "last-event-id": lastId } : {}) };
      res = await t.send("GET", path, { auth: true, ...(o.query ? { query: o.query } : {}), headers, signal: o.signal });
    } catch (err) {
      if (err instanceof ApiError && err.code === "NOT_FOUND" && lastId === undefined) {
        yield { type: "unsupported" };
        return;
      }
      if (!transient(err) || o.signal?.aborted) throw err;
      await sleep(backoffMs(attempt), o.signal);
      continue;
    }
    let expired = false;
    try {
      for await (const e of readSse(res.body!)) {
        lastId = e.id ?? lastId;
        if (e.event === END_EVENT) {
          yield { type: "end", data: e.data };
          return;
        }
        if (e.event === ERROR_EVENT) {
          const error = (JSON.parse(e.data) as Partial<ErrorBody>).error;
          if (error?.code === "UNAUTHORIZED") throw new ApiError(error.code, error.message, 401, error.requestId, undefined);
          expired = error?.code === "TOKEN_EXPIRED";
          break;
        }
        if (e.event !== "message") continue;
        attempt = 0;
        yield { type: "message", data: e.data };
      }
    } catch (err) {
      if (o.signal?.aborted || err instanceof ApiError) throw err;
    }
    if (expired) continue;
    // The stream closed without its end event: the connection dropped or the control plane restarted.
    await sleep(backoffMs(attempt), o.signal);
  }
}

/** The same by polling the logs route with `since` (a control plane without the stream route). */
export async function* followByPolling(t: Transport, id: string, options: FollowOptions = {}): AsyncGenerator<LogEntry, void, undefined> {
  const tail = options.tail ?? 100;
  const read = (query: { tail: number; since?: string }) =>
    retrying(options, (): Promise<LogsResponse> => call(t, "get", "/deployments/{id}/logs", { auth: true, params: { id }, query, signal: options.signal }));
  // The route answers the lines at or after `since` (to the millisecond), and lines carry
  // no id: the cursor is the newest line's instant and how many lines at that instant are out.
  let since = options.since;
  let outAtSince = 0;
  for (let first = true; ; first = false) {
    const ended = await retrying(options, async () => hasEnded((await getDeployment(t, id, options.signal)).deployment.status));
    const { logs } = await read(first ? { tail, since } : { tail: 10_000, since });
    for (const line of first ? logs : logs.slice(outAtSince)) yield line;
    const newest = logs.at(-1);
    if (newest) {
      const ms = Date.parse(newest.timestamp);
      since = newest.timestamp;
      outAtSince = logs.filter((l) => Date.parse(l.timestamp) === ms).length;
      // The tail may have cut lines of that same instant off: count them all.
      if (first && logs.length === tail && Date.parse(logs[0]!.timestamp) === ms) outAtSince = (await read({ tail: 10_000, since })).logs.length;
    }
    // The status was read before the lines: an ended deployment's last lines are in them.
    if (ended) return;
    await sleep(options.intervalMs ?? 1_000, options.signal);
  }
}

/** Retries what a restart or a dropped connection causes, with backoff up to 5 s; anything else is thrown. */
export async function retrying<T>(options: PollOptions, call: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (!transient(err) || options.signal?.aborted) throw err;
      await sleep(backoffMs(attempt), options.signal);
    }
  }
}

/** What a restart or a dropped connection causes: worth waiting out. */
const transient = (err: unknown) =>
  err instanceof NetworkError || (err instanceof ApiError && (err.status === 502 || err.status === 503 || err.status === 504));
const backoffMs = (attempt: number) => Math.min(5_000, 250 * 2 ** attempt) * (0.5 + Math.random() / 2);

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
