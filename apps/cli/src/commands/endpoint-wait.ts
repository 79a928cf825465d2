import { lookup } from "node:dns";
import http from "node:http";
import https from "node:https";
import type { LookupFunction } from "node:net";
import { GATEWAY_ERROR_HEADER } from "@cm/protocol";
import { CmError, type Deployment, WaitError } from "@cm/sdk";
import type { Context } from "../context";

const PROBE_EVERY_MS = 1_000;
const PROBE_TIMEOUT_MS = 5_000;

/**
 * Resolves once each of the running deployment's endpoints answers an HTTP request
 * with anything the container sent (any status: a 404 still means it listens),
 * not a page the gateway made itself; WAIT_TIMEOUT at `deadlineMs`, naming those
 * still silent, and DEPLOYMENT_ENDED if it stops running for good meanwhile.
 */
export async function waitForEndpoints(ctx: Context, running: Deployment, deadlineMs: number): Promise<Deployment> {
  let d = running;
  const silent = new Set(d.endpoints.map((e) => e.url));
  while (silent.size > 0) {
    for (const url of [...silent]) if (await answers(url, ctx.signal)) silent.delete(url);
    if (silent.size === 0) break;
    if (Date.now() >= deadlineMs) {
      const which = running.endpoints.filter((e) => silent.has(e.url)).map((e) => `${e.url} (port ${e.internalPort})`);
      throw new CmError(
        "WAIT_TIMEOUT",
        `deployment ${d.id} is running, but nothing answered at ${which.join(", ")} before the timeout: it may still be loading (cm logs ${d.id} shows what it does), or listen on another port or only on 127.0.0.1`,
      );
    }
    await new Promise((r) => setTimeout(r, PROBE_EVERY_MS));
    ctx.signal.throwIfAborted();
    d = (await ctx.client.deployments.get(d.id)).deployment;
    // An on-failure restart passes through starting on its way back to running.
    if (d.status !== "running" && d.status !== "starting" && d.status !== "pulling")
      throw new WaitError("DEPLOYMENT_ENDED", `deployment ${d.id} is ${d.status}${d.statusReason ? `: ${d.statusReason}` : ""}`, d);
  }
  return d;
}

/** One GET: true when a response came that the gateway did not make itself. */
function answers(url: string, signal: AbortSignal): Promise<boolean> {
  return new Promise((done) => {
    const get = url.startsWith("https:") ? https.get : http.get;
    const req = get(url, { lookup: loopbackNames, timeout: PROBE_TIMEOUT_MS, signal }, (res) => {
      done(res.headers[GATEWAY_ERROR_HEADER] === undefined);
      res.destroy();
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => done(false));
  });
}

/**
 * Names under .localhost are the loopback (RFC 6761), as browsers resolve them; the
 * system's resolver often does not, and a control plane run locally gives its
 * endpoints such names (http://KEY-PORT.localhost:8080).
 */
const loopbackNames: LookupFunction = (hostname, options, callback) => {
  if (hostname !== "localhost" && !hostname.endsWith(".localhost")) return lookup(hostname, options, callback);
  if (options.all) return (callback as (err: null, addresses: Array<{ address: string; family: number }>) => void)(null, [{ address: "127.0.0.1", family: 4 }]);
  callback(null, "127.0.0.1", 4);
};
