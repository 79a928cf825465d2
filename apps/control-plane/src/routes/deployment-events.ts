import type { DeploymentRow } from "@cm/db";
import { type Deployment, LOG_STREAM_END_EVENT, LOG_STREAM_KEEP_ALIVE_MS, TENANT_ACTIONS } from "@cm/protocol";
import type { Context } from "hono";
import type { Deps } from "../deps";
import { serverSentEvents } from "../http/sse";

const ENDED: readonly string[] = TENANT_ACTIONS.start;

/**
 * `present` once per row: the watch hands every follower of a deployment the same
 * row object, and presenting one may read the database.
 */
export function presentOncePerRow(present: (row: DeploymentRow) => Promise<Deployment>) {
  const seen = new WeakMap<DeploymentRow, Promise<Deployment>>();
  return (row: DeploymentRow) => {
    let p = seen.get(row);
    if (!p) {
      p = present(row);
      seen.set(row, p);
    }
    return p;
  };
}

/**
 * A deployment's changes as Server-Sent Events: the deployment as GET
 * /deployments/:id answers it, first as it is now, then each time what a tenant
 * reads of it changes (ids counting on from Last-Event-ID); `end` once it is
 * stopped, exited, failed or deleted; a comment when nothing was sent for
 * LOG_STREAM_KEEP_ALIVE_MS. `present` is GET /deployments/:id's, so both answer the same.
 */
export function streamDeploymentEvents(
  c: Context,
  deps: Pick<Deps, "watch" | "log">,
  dep: DeploymentRow,
  present: (row: DeploymentRow) => Deployment | Promise<Deployment>,
  lastEventId?: string,
) {
  return serverSentEvents(c, deps.log.child({ deploymentId: dep.id }), "events stream", async (stream) => {
    let latest: DeploymentRow | undefined = dep;
    let fresh = true;
    let wake: (() => void) | undefined;
    const stop = deps.watch.onRow(dep.id, (row) => {
      // Only the newest row matters: a follower that fell behind skips the ones between.
      latest = row;
      fresh = true;
      wake?.();
    });
    stream.onAbort(() => {
      stop();
      wake?.();
    });
    // What changed between the caller's read and the listener above is in this read.
    deps.watch.refresh(dep.id);
    let id = lastEventId === undefined ? 0 : Number(lastEventId);
    let sent = "";
    let lastWriteMs = Date.now();
    try {
      while (!stream.aborted) {
        if (fresh) {
          fresh = false;
          const row = latest;
          if (!row) {
            await stream.writeSSE({ event: LOG_STREAM_END_EVENT, data: JSON.stringify({ status: "deleted" }) });
            return;
          }
          const data = JSON.stringify(await present(row));
          if (data !== sent) {
            sent = data;
            await stream.writeSSE({ id: String(++id), data });
            lastWriteMs = Date.now();
          }
          if (ENDED.includes(row.status)) {
            await stream.writeSSE({ event: LOG_STREAM_END_EVENT, data: JSON.stringify({ status: row.status }) });
            return;
          }
          continue;
        }
        const quietMs = lastWriteMs + LOG_STREAM_KEEP_ALIVE_MS - Date.now();
        if (quietMs <= 0) {
          await stream.write(": keep-alive\n\n");
          lastWriteMs = Date.now();
          continue;
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, quietMs);
          wake = done;
          function done() {
            clearTimeout(timer);
            wake = undefined;
            resolve();
          }
        });
      }
    } finally {
      stop();
    }
  });
}
