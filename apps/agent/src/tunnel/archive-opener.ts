import type net from "node:net";
import { pipeline, type Readable } from "node:stream";
import type { ArchiveErrorCode, OpenArchiveFrame } from "@cm/protocol";
import type { z } from "zod";
import type { Logger } from "../logger";
import type { ArchiveClient } from "../runtime/container-runtime";
import { ContainerNotFoundError, PathNotFoundError } from "../runtime/errors";
import type { ContainerState } from "../runtime/types";
import { dialTunnel } from "./tunnel-dial";

export type ArchiveRequest = Omit<z.infer<typeof OpenArchiveFrame>, "type">;
export type ArchiveResult = { ok: true } | { ok: false; code: ArchiveErrorCode; reason: string };

export type ArchiveOpenerOptions = {
  /** http(s)://control-plane/agent/tunnel */
  tunnelUrl: string;
  token: string;
  runtime: ArchiveClient;
  /** this node's container of a deployment, running or not (ownContainer): the only one read */
  container(deploymentId: string): Promise<ContainerState | undefined>;
  logger: Logger;
  connectTimeoutMs?: number;
};

/**
 * Reads a path of a deployment's container out as a tar archive (cm cp, the
 * files route) and carries it on a tunnel connection of its own, as an
 * endpoint's bytes travel: the engine's archive is piped to it, so TCP's flow
 * control paces the read, and the connection's close (the tenant went away)
 * ends the engine's read. A stopped, exited or lost deployment's container is
 * read as a running one is: its files are kept until it is removed.
 */
export class ArchiveOpener {
  private readonly open = new Set<Readable>();
  constructor(private readonly o: ArchiveOpenerOptions) {}

  /** Says at once why the path cannot be read; otherwise the archive travels on its own connection. */
  async openArchive(req: ArchiveRequest): Promise<ArchiveResult> {
    const c = await this.o.container(req.deploymentId);
    if (!c) return { ok: false, code: "NO_CONTAINER", reason: `deployment ${req.deploymentId} has no container on this node` };
    let archive: Readable;
    try {
      archive = await this.o.runtime.archive(c.id, req.path);
    } catch (err) {
      if (err instanceof PathNotFoundError) return { ok: false, code: "PATH_NOT_FOUND", reason: err.message };
      if (err instanceof ContainerNotFoundError) return { ok: false, code: "NO_CONTAINER", reason: `deployment ${req.deploymentId}'s container was removed` };
      return { ok: false, code: "ARCHIVE_FAILED", reason: `the container engine could not read ${req.path}: ${(err as Error).message}` };
    }
    this.open.add(archive);
    archive.once("close", () => this.open.delete(archive));
    const log = this.o.logger.child({ tunnelId: req.tunnelId, deploymentId: req.deploymentId });
    dialTunnel(this.o.tunnelUrl, this.o.token, req.tunnelId, this.o.connectTimeoutMs).then(
      (socket) => this.carry(archive, socket, log),
      (err: Error) => {
        log.warn("archive tunnel failed", { error: err.message });
        archive.destroy();
      },
    );
    return { ok: true };
  }

  private carry(archive: Readable, socket: net.Socket, log: Logger) {
    if (archive.destroyed) return void socket.destroy();
    // Nothing comes from the control plane: read only to see it close, which ends the read at once (a paused archive writes nothing that would fail).
    socket.on("end", () => socket.destroy());
    socket.resume();
    pipeline(archive, socket, (err) => {
      if (!err) return;
      // The tenant went away, or the engine failed mid-read. A reset, not an end: the control plane must not take half an archive for all of it.
      log.info("archive read ended early", { error: err.message });
      archive.destroy();
      socket.resetAndDestroy();
    });
  }

  /** Ends every read (the agent is shutting down). */
  closeAll() {
    for (const archive of this.open) archive.destroy();
    this.open.clear();
  }
}
