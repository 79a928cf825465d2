import type { Duplex } from "node:stream";
import { FILES_MAX_READS_PER_DEPLOYMENT, FILES_MEDIA_TYPE, FilesPath } from "@cm/protocol";
import { z } from "zod";
import { ArchiveError } from "../agents/tunnel-broker";
import type { Deps } from "../deps";
import { ApiError } from "../errors";
import { DialError } from "../gateway/ports";
import { createRouter, IdParams, REQUEST_ID_HEADER, type RouteFactory } from "../http/route";

const FilesQuery = z.object({
  path: FilesPath.meta({
    description:
      "An absolute path in the container: a file, a directory (its tree), or a directory ending in `/.` (its contents, under `.`). A link at the end is archived as the link; with a trailing `/` it is followed inside the container.",
    example: "/workspace/results",
  }),
});

/** The route's description, with this installation's timeouts. */
const description = (config: Deps["config"]) =>
  [
    "The path as a tar archive, read out of the deployment's container whether it runs or not: a stopped, exited or failed deployment keeps its container, and its files, until it is deleted (a deployment whose node was lost, until LOST_RETENTION_S after the loss). What `cm cp ID:PATH LOCAL` reads; as Docker's `GET /containers/{id}/archive?path=` (what `docker cp` reads) answers it: the archive's top entry is the path's last name, or `.` for a path ending in `/.`.",
    "The node's agent reads it with its container engine's archive API (no tar, shell or running process is needed in the container) and sends it through its own connection to the control plane, so the node needs no inbound port. The body streams as the node sends it, at the pace the client reads; closing the connection ends the read on the node.",
    `Refusals come before the first byte, in the one error shape: another account's deployment, or a deleted one, is DEPLOYMENT_NOT_FOUND; nothing at the path PATH_NOT_FOUND; no container kept for the deployment (not made yet, its image could not be pulled, or removed) CONTAINER_GONE with details.currentStatus; a node that is not connected, or that does not answer within ${config.TUNNEL_OPEN_TIMEOUT_MS / 1000} s (TUNNEL_OPEN_TIMEOUT_MS), NODE_OFFLINE; the engine's own failure FILES_READ_FAILED; a deployment with ${FILES_MAX_READS_PER_DEPLOYMENT} read open already RATE_LIMITED with Retry-After.`,
    "The engine holds the container for as long as a read is open: one read of a deployment at a time, and an exec into a running container (`cm exec`, and `cm cp` into or out of a running container, which goes through exec) waits until the read ends. Read a running container's large files with `cm cp`, or stop it first.",
    `A read stops when its client reads nothing and the node sends nothing for ${config.GATEWAY_IDLE_TIMEOUT_MS / 1000} s (GATEWAY_IDLE_TIMEOUT_MS), when the deployment is deleted, and when the sign-in that opened it is revoked (signed out, a refresh token used twice), not when its access token expires; a read that stops early ends the body without its last chunk, which an HTTP client reports as an error.`,
  ].join("\n\n");

/** `GET /deployments/{id}/files?path=`: a path of the deployment's container as a tar archive. Mounted at /deployments. */
export function filesRoutes(deps: Deps, route: RouteFactory) {
  return createRouter().openapi(
    route(
      {
        method: "get",
        path: "/{id}/files",
        operationId: "getDeploymentFiles",
        tags: ["deployments"],
        summary: "Read a path out of a deployment's container, running or not, as a tar archive",
        description: description(deps.config),
        request: { params: IdParams, query: FilesQuery },
        responses: {
          200: {
            description: "The tar archive of the path, streamed",
            headers: {
              ...REQUEST_ID_HEADER,
              "Content-Disposition": { description: "attachment, named after the path's last name: `<name>.tar`", schema: { type: "string" as const } },
            },
            content: {
              [FILES_MEDIA_TYPE]: { schema: z.string().meta({ format: "binary", description: "a tar archive (POSIX ustar, with PAX and GNU long names)" }) },
            },
          },
        },
      },
      { auth: true, errors: ["DEPLOYMENT_NOT_FOUND", "PATH_NOT_FOUND", "CONTAINER_GONE", "NODE_OFFLINE", "FILES_READ_FAILED", "RATE_LIMITED"] },
    ),
    async (c) => {
      const { path } = c.req.valid("query");
      const dep = await deps.deployments.mine(c.req.valid("param").id, c.get("user").id);
      // Connected here, or to the replica the read is carried to.
      if (!(await deps.reachable(dep.nodeId)))
        throw new ApiError("NODE_OFFLINE", `node ${dep.nodeId}, which keeps the deployment's container, is not connected; try again once it is back`);
      const archive = await deps.archives
        .read({ nodeId: dep.nodeId, deploymentId: dep.id, path }, c.get("grant"))
        .catch((err: unknown) => Promise.reject(refusal(err, dep)));
      c.get("log").info("files read", { deploymentId: dep.id });
      c.header("Content-Type", FILES_MEDIA_TYPE);
      c.header("Content-Disposition", `attachment; filename="${archiveName(path)}"`);
      return c.body(bodyOf(archive));
    },
  );
}

/** Why the path could not be read, in the API's words. */
function refusal(err: unknown, dep: { id: string; nodeId: string; status: string }): unknown {
  if (err instanceof DialError) return new ApiError("NODE_OFFLINE", `node ${dep.nodeId} could not be reached: ${err.message}`);
  if (!(err instanceof ArchiveError)) return err;
  if (err.code === "PATH_NOT_FOUND") return new ApiError("PATH_NOT_FOUND", err.message);
  if (err.code === "NO_CONTAINER")
    return new ApiError(
      "CONTAINER_GONE",
      `deployment ${dep.id} is ${dep.status} and its node keeps no container for it (${err.message}): there are no files to read`,
      { currentStatus: dep.status },
    );
  return new ApiError("FILES_READ_FAILED", err.message);
}

/** `<last name>.tar`, in the characters a header's quoted filename takes everywhere. */
function archiveName(path: string): string {
  const last =
    path
      .replace(/\/\.?$/, "")
      .split("/")
      .pop() || "root";
  return `${last.replace(/[^A-Za-z0-9._-]/g, "_")}.tar`;
}

/** What the body holds of the archive before the tunnel is read no more: TCP's flow control paces the node from there. */
const BODY_BUFFER_BYTES = 256 * 1024;

/**
 * The tunnel as the response's body, paced by the client: the tunnel is read
 * only while the body wants more. An archive's end is the agent's clean end of
 * the connection; a connection that closes, or fails, before it (the agent's
 * reset when the engine failed mid-read) fails the body, so that the client
 * sees an error rather than a shorter archive. (Readable.toWeb calls a tunnel
 * closed at once after its end "premature": the tunnel closes itself on end.)
 */
function bodyOf(tunnel: Duplex): ReadableStream<Uint8Array> {
  let ended = false;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        tunnel.pause();
        tunnel.on("data", (chunk: Buffer) => {
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((controller.desiredSize ?? 0) <= 0) tunnel.pause();
        });
        tunnel.once("end", () => {
          ended = true;
          controller.close();
        });
        tunnel.once("close", () => ended || controller.error(new Error("the node's connection closed before the archive's end")));
        tunnel.on("error", () => tunnel.destroy());
      },
      pull() {
        tunnel.resume();
      },
      cancel() {
        tunnel.destroy();
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: BODY_BUFFER_BYTES }),
  );
}
