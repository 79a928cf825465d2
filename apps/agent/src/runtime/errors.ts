/** The image is not on this node and pulling it failed (no registry access, unknown image, auth). */
export class ImageUnavailableError extends Error {
  override readonly name = "ImageUnavailableError";
  constructor(
    readonly ref: string,
    /** Docker's own message */
    readonly reason: string,
  ) {
    super(`image "${ref}" is not present on this node and could not be pulled: ${reason}`);
  }
}

export class ContainerNotFoundError extends Error {
  override readonly name = "ContainerNotFoundError";
  constructor(readonly containerId: string) {
    super(`container ${containerId} does not exist`);
  }
}

/** Nothing is at the path in the container, or a part of it before its end is not a directory. */
export class PathNotFoundError extends Error {
  override readonly name = "PathNotFoundError";
  constructor(readonly path: string) {
    super(`no such file or directory in the container: ${path}`);
  }
}

/** dockerode rejects with an Error carrying the HTTP status of Docker's answer. */
export function dockerStatusCode(error: unknown): number | undefined {
  const statusCode = (error as { statusCode?: unknown } | null)?.statusCode;
  return typeof statusCode === "number" ? statusCode : undefined;
}

/** Runs a Docker call, treating Docker's answer `status` (e.g. 404: already gone) as success. */
export async function ignoringStatus(status: number, call: () => Promise<unknown>): Promise<void> {
  try {
    await call();
  } catch (error) {
    if (dockerStatusCode(error) !== status) throw error;
  }
}

/**
 * Docker's own message from a dockerode error. dockerode parses the body into
 * `json` for most calls, but not for streaming ones like pull, where only its
 * "(HTTP code 500) server error - <message> " text is left to unwrap.
 */
export function dockerMessage(error: unknown): string {
  const json = (error as { json?: { message?: unknown } | null } | null)?.json;
  if (json && typeof json.message === "string") return json.message;
  const text = error instanceof Error ? error.message : String(error);
  return text.replace(/^\(HTTP code \d+\)[^-]*- /, "").trim();
}
