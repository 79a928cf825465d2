// Where a shipper reads a container's log from. The json-file on disk when the
// agent can read it (the normal case: it runs as root beside dockerd), else
// Docker's API. Both are polled for what follows a cursor; neither uses Docker's
// follow, which skips and repeats lines when json-file rotates under a busy
// container (Docker 20.10).
import { constants } from "node:fs";
import { access } from "node:fs/promises";
import type { LogCursor } from "@cm/protocol";
import type { Logger } from "../logger";
import type { LogClient } from "../runtime/container-runtime";
import type { LogLine } from "../runtime/types";
import { DockerApiLogSource } from "./docker-api-source";
import { JsonFileLogSource } from "./json-file-source";

export interface LogSource {
  readonly kind: "json-file" | "docker-api";
  /** The lines after `after` that this source has not returned yet, oldest first. */
  readNew(after: LogCursor): Promise<LogLine[]>;
  close(): Promise<void>;
}

export interface LogSourceTarget {
  containerId: string;
  /** the container's json-file, when Docker said where it is */
  logPath: string | null;
}

export async function openLogSource(target: LogSourceTarget, runtime: LogClient, logger: Logger): Promise<LogSource> {
  if (target.logPath) {
    try {
      await access(target.logPath, constants.R_OK);
      return new JsonFileLogSource(target.logPath, logger);
    } catch (error) {
      logger.debug("Cannot read the container's log file; reading its log through Docker", { containerId: target.containerId, error });
    }
  }
  return new DockerApiLogSource(target.containerId, runtime);
}
