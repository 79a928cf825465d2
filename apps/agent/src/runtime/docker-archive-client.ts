import type { Readable } from "node:stream";
import type Docker from "dockerode";
import type { ArchiveClient } from "./container-runtime";
import { ContainerNotFoundError, dockerMessage, dockerStatusCode, PathNotFoundError } from "./errors";
import type { RuntimeLogger } from "./logger";

/**
 * A container's files as a tar archive, through the engine's archive API
 * (`GET /containers/{id}/archive`): the engine mounts the container's
 * filesystem itself, so a stopped or exited container is read as a running one
 * is, and nothing runs in it. Paths resolve inside the container's root (its
 * links included), as `docker cp` resolves them.
 */
export class DockerArchiveClient implements ArchiveClient {
  constructor(
    private readonly docker: Docker,
    private readonly logger: RuntimeLogger,
  ) {}

  async archive(containerId: string, path: string): Promise<Readable> {
    this.logger.debug("Reading a container's archive", { containerId, path });
    try {
      return (await this.docker.getContainer(containerId).getArchive({ path })) as unknown as Readable;
    } catch (error) {
      throw archiveError(error, containerId, path);
    }
  }
}

/**
 * The engine's refusal in the agent's words. Docker answers 404 both for a
 * missing container ("No such container") and a missing path ("Could not find
 * the file"), and 500 for a path through a file ("lstat <its own overlay
 * directory on the host>/...: not a directory"), whose text names the host's
 * paths and is not passed on.
 */
export function archiveError(error: unknown, containerId: string, path: string): Error {
  const status = dockerStatusCode(error);
  const message = dockerMessage(error);
  if (status === 404 && /no such container/i.test(message)) return new ContainerNotFoundError(containerId);
  if (status === 404 || /not a directory|no such file or directory/i.test(message)) return new PathNotFoundError(path);
  return new Error(message.replace(/\S*\/merged(?=\/)/g, ""));
}
