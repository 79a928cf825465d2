import type { Duplex } from "node:stream";
import { FILES_MAX_READS_PER_DEPLOYMENT } from "@cm/protocol";
import { ApiError } from "../errors";
import type { AccessGrant } from "../services/auth-service";
import type { GrantWatch } from "../services/grant-watch";
import type { ArchiveTarget, TunnelBroker } from "./tunnel-broker";

/** What a client is told to wait before trying again past the cap: as long as an exec refusal says. */
const RETRY_AFTER_S = 5;

/**
 * Tenants' reads of their containers' files (the files route, `cm cp ID:PATH`),
 * counted per deployment from the route's check until the archive's connection
 * closes, under FILES_MAX_READS_PER_DEPLOYMENT: the engine holds the container
 * while it is read, and a read it makes wait would wait unseen. A read ends when the sign-in
 * that opened it is revoked (signed out, a stolen refresh token), not when its
 * access token expires: it was checked when it began, as a download is.
 */
export class ArchiveReads {
  private readonly countOf = new Map<string, number>();

  constructor(private readonly o: { tunnels: Pick<TunnelBroker, "readArchive">; grants: GrantWatch }) {}

  /** The deployment's reads open or opening now. */
  readsOf(deploymentId: string): number {
    return this.countOf.get(deploymentId) ?? 0;
  }

  /** The archive, or RATE_LIMITED past the cap; the tunnel broker's errors as it throws them. */
  async read(target: ArchiveTarget, grant: AccessGrant): Promise<Duplex> {
    const max = FILES_MAX_READS_PER_DEPLOYMENT;
    if (this.readsOf(target.deploymentId) >= max)
      throw new ApiError(
        "RATE_LIMITED",
        `deployment ${target.deploymentId} has ${max === 1 ? "a read" : `${max} reads`} of its files open, the most it may: the container's engine reads one at a time; wait for it to end`,
        { limit: max, retryAfterSeconds: RETRY_AFTER_S },
        { "Retry-After": String(RETRY_AFTER_S) },
      );
    // Counted before the agent is asked, so that a burst of reads cannot all pass the cap.
    this.bump(target.deploymentId, 1);
    let stream: Duplex;
    try {
      stream = await this.o.tunnels.readArchive(target);
    } catch (err) {
      this.bump(target.deploymentId, -1);
      throw err;
    }
    const hold = this.o.grants.hold(grant, (why) => {
      if (why.code !== "TOKEN_EXPIRED") stream.destroy();
    });
    // At its end already: the client may ask again as soon as it has the last byte, before the tunnel's close.
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      hold.release();
      this.bump(target.deploymentId, -1);
    };
    stream.once("end", release);
    stream.once("close", release);
    return stream;
  }

  private bump(deploymentId: string, by: 1 | -1) {
    const n = this.readsOf(deploymentId) + by;
    if (n > 0) this.countOf.set(deploymentId, n);
    else this.countOf.delete(deploymentId);
  }
}
