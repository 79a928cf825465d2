import type * as P from "@cm/protocol";
import type { Route } from "./routes";
import type { Transport } from "./transport";

// The document's path (a route it does not have fails the typecheck) and the protocol's word, typed from it.
const FILES: Route<"get"> = "/deployments/{id}/files";
const MEDIA_TYPE: typeof P.FILES_MEDIA_TYPE = "application/x-tar";

export interface FilesOptions {
  /** Aborting it ends the read, on the node too. */
  signal?: AbortSignal;
}

/**
 * A path of the deployment's container as a tar archive, running or not
 * (GET /deployments/{id}/files): what `cm cp ID:PATH LOCAL` reads. Resolves once
 * the node has started sending it, with the archive's bytes to read; rejects
 * with the API's refusal (ApiError: PATH_NOT_FOUND, CONTAINER_GONE,
 * NODE_OFFLINE, ...) before any byte. A read cut short fails the stream with an
 * error rather than ending it.
 */
export async function files(t: Transport, id: string, path: string, options: FilesOptions = {}): Promise<ReadableStream<Uint8Array>> {
  const res = await t.send("GET", FILES.replace("{id}", encodeURIComponent(id)), {
    auth: true,
    query: { path },
    headers: { accept: `${MEDIA_TYPE}, application/json` },
    ...(options.signal ? { signal: options.signal } : {}),
  });
  if (!res.body) throw new TypeError("the files route answered with no body");
  return res.body;
}
