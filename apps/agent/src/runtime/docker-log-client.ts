import type Docker from "dockerode";
import type { LogClient } from "./container-runtime";
import { ContainerNotFoundError, dockerStatusCode } from "./errors";
import { createLogDecoder } from "./log-decoder";
import { toDockerSince } from "./log-lines";
import type { RuntimeLogger } from "./logger";
import type { LogLine, LogOptions, LogStreamHandle } from "./types";

export class DockerLogClient implements LogClient {
  constructor(
    private readonly docker: Docker,
    private readonly logger: RuntimeLogger,
  ) {}

  async logs(id: string, options: LogOptions, onLine: (line: LogLine) => void): Promise<LogStreamHandle> {
    const container = this.docker.getContainer(id);
    let tty: boolean;
    try {
      tty = (await container.inspect()).Config.Tty;
    } catch (error) {
      if (dockerStatusCode(error) === 404) throw new ContainerNotFoundError(id);
      throw error;
    }
    const decoder = createLogDecoder({ multiplexed: !tty }, onLine);
    const query = {
      stdout: true,
      stderr: true,
      timestamps: true,
      ...(options.since ? { since: toDockerSince(options.since) } : {}),
      ...(options.tail !== undefined ? { tail: options.tail } : {}),
    };
    this.logger.debug("Reading container logs", { containerId: id, follow: options.follow, since: query.since });

    if (!options.follow) {
      decoder.push(await container.logs({ ...query, follow: false }));
      decoder.end();
      return { stop: () => {}, done: Promise.resolve() };
    }

    const stream = (await container.logs({ ...query, follow: true })) as NodeJS.ReadableStream & { destroy(): void };
    let finished = false;
    const done = new Promise<void>((resolve) => {
      const finish = () => {
        if (finished) return;
        finished = true;
        decoder.end();
        this.logger.debug("Container log stream ended", { containerId: id });
        resolve();
      };
      stream.on("data", (chunk: Buffer) => {
        if (!finished) decoder.push(chunk);
      });
      stream.on("end", finish);
      stream.on("close", finish);
      stream.on("error", (error: Error) => {
        this.logger.warn("Container log stream failed", { containerId: id, error: error.message });
        finish();
      });
    });
    return {
      stop: () => {
        if (finished) return;
        stream.destroy();
      },
      done,
    };
  }
}
