import { localImageCandidates } from "@cm/protocol";
import type Docker from "dockerode";
import type { EnsuredImage, EnsureImageOptions, ImageClient } from "./container-runtime";
import { dockerMessage, dockerStatusCode, ImageUnavailableError } from "./errors";
import type { RuntimeLogger } from "./logger";
import { hideNetworkDetails, shortPullReason } from "./network-details";
import type { PullEvent, PullState } from "./pull-progress";
import { initialPullState, pullEventError, reducePullEvent, summarizePull } from "./pull-progress";

/** A bound on the inspections one specs report makes: a node with more tagged images reports on the first ones. */
const IMAGES_INSPECTED_MAX = 2000;

export class DockerImageClient implements ImageClient {
  constructor(
    private readonly docker: Docker,
    private readonly logger: RuntimeLogger,
  ) {}

  async imagePresent(ref: string): Promise<boolean> {
    return (await this.localName(ref)) !== undefined;
  }

  async ensureImage(ref: string, options: EnsureImageOptions = {}): Promise<EnsuredImage> {
    const local = await this.localName(ref);
    if (local !== undefined) {
      this.logger.debug("Image present locally, not pulling", { ref, local });
      return { ref: local, pulled: false };
    }
    const { auth } = options;
    // Whose login it pulls with is the operator's business; the password never is.
    this.logger.debug("Pulling image", { ref, ...(auth ? { registry: auth.serveraddress, username: auth.username } : {}) });
    await this.pull(ref, options);
    this.logger.debug("Pulled image", { ref });
    return { ref, pulled: true };
  }

  async imagesWithoutCommand(max: number): Promise<string[]> {
    const names: string[] = [];
    // Only tagged images can be named by a deployment; Docker's list has no Config, so each is inspected.
    const images = (await this.docker.listImages()).filter((image) => (image.RepoTags ?? []).some((tag) => tag !== "<none>:<none>"));
    for (const image of images.slice(0, IMAGES_INSPECTED_MAX)) {
      if (names.length >= max) break;
      const config = await this.docker
        .getImage(image.Id)
        .inspect()
        .then((info) => info.Config as { Cmd?: string[] | null; Entrypoint?: string[] | null } | undefined)
        .catch(() => undefined); // removed meanwhile
      if (!config || (config.Cmd?.length ?? 0) > 0 || (config.Entrypoint?.length ?? 0) > 0) continue;
      names.push(...(image.RepoTags ?? []).filter((tag) => tag !== "<none>:<none>"));
    }
    return names.slice(0, max);
  }

  /** The first name the image is stored under locally, if any. */
  private async localName(ref: string): Promise<string | undefined> {
    for (const candidate of localImageCandidates(ref)) {
      try {
        await this.docker.getImage(candidate).inspect();
        return candidate;
      } catch (error) {
        if (dockerStatusCode(error) !== 404) throw error;
      }
    }
    return undefined;
  }

  private async pull(ref: string, { onProgress, auth, signal }: EnsureImageOptions): Promise<void> {
    signal?.throwIfAborted();
    let stream: NodeJS.ReadableStream;
    try {
      // dockerode sends authconfig as X-Registry-Auth, for this request only. The
      // signal closes the request's connection: the engine cancels a pull whose client left.
      stream = await this.docker.pull(ref, { ...(auth ? { authconfig: auth } : {}), ...(signal ? { abortSignal: signal } : {}) });
    } catch (error) {
      signal?.throwIfAborted();
      throw this.unavailable(ref, dockerMessage(error));
    }
    // Docker answers 200 and then reports failures (e.g. a missing tag) as events in the stream.
    const failure = await new Promise<string | undefined>((resolve) => {
      let state: PullState = initialPullState;
      let streamFailure: string | undefined;
      const aborted = () => resolve(undefined);
      signal?.addEventListener("abort", aborted, { once: true });
      this.docker.modem.followProgress(
        stream,
        (error: Error | null) => {
          signal?.removeEventListener("abort", aborted);
          resolve(error ? error.message : streamFailure);
        },
        (event: PullEvent) => {
          streamFailure ??= pullEventError(event);
          const next = reducePullEvent(state, event);
          if (next !== state) {
            state = next;
            onProgress?.(summarizePull(state));
          }
        },
      );
    });
    signal?.throwIfAborted();
    if (failure !== undefined) throw this.unavailable(ref, failure);
  }

  /** The tenant reads the reason; the operator's log keeps Docker's own words. */
  private unavailable(ref: string, reason: string): ImageUnavailableError {
    this.logger.warn("Could not pull an image", { ref, reason });
    return new ImageUnavailableError(ref, hideNetworkDetails(shortPullReason(reason), [ref]));
  }
}
